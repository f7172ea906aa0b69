package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// probe finds out whether a listening connection keeps its session, which
// a pooler in transaction mode (PgBouncer's usual setting for fleets) does
// not give: LISTEN would run there on whichever server the pooler lends,
// and no notification comes back. A pooler that answers for the server
// with a key of its own is found out before any LISTEN, which is then
// rolled back (session.Conn.Listen): that check is the guard that no
// LISTEN is left on a server process a pooler shares. The probe covers
// whatever else does not deliver notifications: the listener announces a
// nonce of its own on its channel as it starts to wait, and hears it
// within a probe window, or never. The announcement is sent on the
// listening connection itself, which is the wrapper's only one: on a
// connection that keeps its session, PostgreSQL delivers a backend's own
// notifications to it when the transaction commits, so the probe is
// heard at once; on one that does not, the NOTIFY and the LISTEN ran on
// server processes the connection does not keep, and nothing comes back
// on the connection's own. Other listeners of the channel ignore a
// payload that is not theirs.
type probe struct {
	nonce string
	by    time.Time // when the probe counts as lost; zero until sent
	heard bool
}

func newProbe() probe { return probe{nonce: fmt.Sprintf("probe %016x", rand.Uint64())} }

// probeWindow is how long a probe may take to be heard: the retry
// interval, at least a second for a busy machine.
func (s *Store) probeWindow() time.Duration { return max(s.cfg.RetryInterval, time.Second) }

// probeSQL announces @payload on @channel.
const probeSQL = `SELECT pg_notify(@channel, @payload)`

// send announces the nonce on channel through db, once (again on a later
// call if the database could not take it).
func (p *probe) send(ctx context.Context, s *Store, db DB, channel, job string) {
	if p.heard || !p.by.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.probeWindow())
	defer cancel()
	if _, err := db.Exec(ctx, probeSQL, pgx.StrictNamedArgs{"channel": channel, "payload": p.nonce}); err != nil {
		s.log.Debug().Err(err).Str("job", job).Msg("cannot probe for notifications; trying again on the next wait")
		return
	}
	p.by = time.Now().Add(s.probeWindow())
}

// hear reports whether payload is the probe's, which proves the session.
func (p *probe) hear(payload string) bool {
	if payload != p.nonce {
		return false
	}
	p.heard = true
	return true
}

// bound shortens a wait of d to the probe's deadline while it is unheard.
func (p *probe) bound(d time.Duration) time.Duration {
	if p.heard || p.by.IsZero() {
		return d
	}
	return max(min(d, time.Until(p.by)), 0)
}

// lost reports whether the probe went unheard past its deadline.
func (p *probe) lost() bool {
	return !p.heard && !p.by.IsZero() && !time.Now().Before(p.by)
}

// sayDeaf says once that a listener of job (what it waits for) gives up
// listening for good and polls instead.
func (s *Store) sayDeaf(job, waiting string) {
	s.log.Warn().Str("job", job).Stringer("retry_interval", s.cfg.RetryInterval).
		Msg(waiting + " without notifications: the database connection does not keep a session (a pooler in transaction mode?); looking every retry interval")
}
