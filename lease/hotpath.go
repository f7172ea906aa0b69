package lease

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// The first take of a Store is sent behind the tables' shape checks, in
// one pipeline (see schema.Objects.QueueShapeChecks). Their failure, or a
// take that fails for want of a table, column, unique index or the like,
// sends the Store down the slow path: tryAcquire has ensureSchema read the
// catalog, create or upgrade the tables (or refuse the lease table with a
// *SchemaError, nothing altered), and then takes again, with the plain
// take. DDL is no part of a take's budget: a lock or a slow server may hold
// it up for seconds, which a short TTL's budget would not have, and the
// take's own clock starts after it. After one success either way, a Store
// uses the plain take: its tables were checked.

// errTablesUnchecked is a take's answer when the Store's tables want the
// catalog read first (see above).
var errTablesUnchecked = errors.New("tables not checked yet")

// batcher is what *pgxpool.Pool and *pgx.Conn offer for pipelines.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// takeArgs are the named arguments every take has (see takeSpec): @job,
// @holder and @ttl, in microseconds.
func (s *Store) takeArgs(job string) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"job": job, "holder": s.cfg.holder, "ttl": s.cfg.TTL.Microseconds()}
}

// take runs the single-slot take (see takeSQL) with args, reading its
// row with read: with the shape checks in front until the Store's tables
// are known to be right. checkErr is errTablesUnchecked when the catalog
// must decide first (see above); err is the take's.
func (s *Store) take(ctx context.Context, db querier, args pgx.StrictNamedArgs, read reader) (checkErr, err error) {
	if s.checked.Load() == nil {
		if b, ok := db.(batcher); ok {
			h := s.recording(s.cfg.historyKeep > 0)
			err := s.takeChecked(ctx, b, h, args, read)
			if err == nil || errors.Is(err, pgx.ErrNoRows) {
				// A slow path that finished meanwhile knows more. The
				// shape checks found the functions there.
				s.checked.CompareAndSwap(nil, &tablesChecked{hist: h, functions: true})
				return nil, err
			}
			// A refusal that the catalog does not explain may still be
			// the history's (a trigger or constraint of the operator's):
			// the slow path tells.
			if !needsCatalog(err) && (retryable(err) || ctx.Err() != nil) {
				return nil, err
			}
		}
		// ensureSchema decides, too, whether runs are recorded: a history
		// table that failed its shape check is not written to, and the
		// take goes on without it.
		return errTablesUnchecked, nil
	}
	h := s.hist()
	if h == nil {
		return nil, queryRow(ctx, db, s.sql.take, args, read)
	}
	// A history table changed under a running instance must not keep it
	// from taking the lease: the take is tried again without it.
	err = queryRow(ctx, db, h.take, args, read)
	return nil, s.withoutHistory(ctx, err, func() error {
		return queryRow(ctx, db, s.sql.take, args, read)
	})
}

// takeChecked sends the shape checks of both tables and the take that also
// records runs in one pipeline. The history check also asks for the
// privileges recording and pruning need; without them, the catalog decides.
func (s *Store) takeChecked(ctx context.Context, b batcher, h *historyStatements, args pgx.StrictNamedArgs, read reader) error {
	batch := &pgx.Batch{}
	s.objects.QueueShapeChecks(batch, h.prune)
	batch.Queue(h.take, args)
	br := b.SendBatch(ctx, batch)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = read(rows)
		}
	}
	// Close reads up to the end of the implicit transaction: a failed
	// commit must not pass for a lease.
	if cerr := br.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		return cerr
	}
	return err
}

// look reads job's lease without writing: a plain SELECT, which takes no
// transaction id and locks nothing, where the acquire's INSERT ... ON
// CONFLICT would lock the row and take one even when it takes nothing. It
// returns a *HeldError while the lease is live, and nil when it is free,
// expired or has no row: then it is worth trying to take.
func (s *Store) look(ctx context.Context, db querier, job string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TTL-s.cfg.StopBefore())
	defer cancel()
	e, err := s.readHolder(ctx, db, job)
	if err != nil {
		s.cfg.observer.Failed(err)
		return err
	}
	s.cfg.observer.Contacted()
	if e.ExpiresIn <= 0 {
		return nil
	}
	return e
}

// lookThenTake tries to take job's lease only when a look finds it free.
func (s *Store) lookThenTake(ctx context.Context, db querier, job string) (*Lease, error) {
	// A look reads one row; a job of several slots is read, and taken, by
	// the slot statement itself.
	if s.cfg.slots > 1 {
		return s.tryAcquire(ctx, db, job)
	}
	if err := s.look(ctx, db, job); err != nil {
		return nil, err
	}
	return s.tryAcquire(ctx, db, job)
}
