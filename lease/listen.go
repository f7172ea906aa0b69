package lease

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// channelFor names the NOTIFY channel of a lease table: "leasewrap:" and
// the table's name, or a hash of it where that would pass PostgreSQL's
// 63-byte limit for identifiers.
func channelFor(table pgx.Identifier) string {
	name := "leasewrap:" + table.Sanitize()
	if len(name) <= 63 {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(table.Sanitize()))
	return fmt.Sprintf("leasewrap:%016x", h.Sum64())
}

// listen wakes a standby (a send on wake) whenever a lease on job is
// released, and once as soon as it listens, so that a release that came
// before is not missed. It needs a connection of its own, which only a pool
// can give; with any other DB, and whenever listening fails (a pooler in
// transaction mode cannot keep a LISTEN), the standby polls as before.
func (s *Store) listen(ctx context.Context, job string, wake chan<- struct{}) {
	pool, ok := s.db.(*pgxpool.Pool)
	if !ok {
		return
	}
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, pool, job, wake)
		if ctx.Err() != nil {
			return
		}
		s.log.Debug().Err(err).Str("job", job).Msg("cannot listen for releases; polling only for now")
		t := time.NewTimer(s.cfg.retryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, pool *pgxpool.Pool, job string, wake chan<- struct{}) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that listens must not go back to the pool.
	raw := conn.Hijack()
	defer raw.Close(context.WithoutCancel(ctx))
	if _, err := raw.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	nudge(wake)
	for {
		n, err := raw.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == job {
			nudge(wake)
		}
	}
}

// nudge sends on wake without blocking: one pending wake-up is enough.
func nudge(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
