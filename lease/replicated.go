package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/internal/session"
)

// Leases confirmed on the standbys (WithRequireReplicated).
//
// Asynchronous replication acknowledges a commit before any standby has it,
// so a failover can lose a holder's last renewal (it runs on, while the new
// primary has an earlier expiry that another instance takes after) or its
// take. Under WithRequireReplicated a take or renewal counts only once
// every standby streaming from the primary has replayed it:
//
//   - the statement commits with synchronous_commit = remote_apply, set for
//     its own transaction in the same pipeline (no round trip). Where
//     synchronous_standby_names names standbys, the commit itself waits for
//     them; everywhere, the commit record asks each standby to report its
//     replay position the moment it has applied it, rather than with
//     whatever reply it sends next (prompt on PostgreSQL 15 here, but
//     nothing promises it sooner than wal_receiver_status_interval);
//   - then, on the same connection, so on the same server, it reads the
//     primary's flush position (at or past the commit record: the commit
//     was flushed before it returned) and polls pg_stat_replication until
//     every streaming standby's replay_lsn has reached it, within the time
//     the take or renewal has anyway.
//
// remote_apply alone is not enough: with no standby named in
// synchronous_standby_names (asynchronous replication, the case this is
// for) it waits for nothing, and says nothing.
//
// Every streaming standby, not any one: a failover promotes one of them,
// and leasewrap cannot know which (the most advanced, the one a failover
// manager prefers, or the one an operator picks). Standbys still catching
// up (state catchup) are not counted: they lack recent writes of every
// kind, and waiting for one would stop every job while a standby is
// rebuilt. Logical replication (an active logical slot) and WAL archivers
// such as pg_receivewal (no replay position) are not standbys.

// ErrNotReplicated is matched (errors.Is) by the error of a take or
// renewal that was not confirmed on the standbys (WithRequireReplicated):
// none streams from the primary, the role cannot see them, or they did
// not replay it in time. A take that fails so is handed back; a renewal
// that fails so is a failed renewal.
var ErrNotReplicated = errors.New("not confirmed on the standbys")

// ErrStandbysHidden (which also matches ErrNotReplicated) means the role
// may not read the standbys' replay positions in pg_stat_replication: it
// needs pg_monitor (or pg_read_all_stats), or to be a superuser. Waiting
// does not mend it.
var ErrStandbysHidden = errors.New("the role cannot read the standbys' replay positions")

// replicationError is a take or renewal not confirmed on the standbys: its
// message says what and why, and it matches ErrNotReplicated (and
// ErrStandbysHidden when that is why).
type replicationError struct {
	msg    string
	hidden bool
	// cause is why the wait ended early: its deadline, or a failed read
	// (readFailed: the database could not say, which is not a refusal).
	cause      error
	readFailed bool
}

func (e *replicationError) Error() string { return e.msg }
func (e *replicationError) Unwrap() error { return e.cause }

func (e *replicationError) Is(target error) bool {
	return target == ErrNotReplicated && !e.readFailed || e.hidden && target == ErrStandbysHidden
}

// as names the take or renewal the error is about, in front of its
// reason: "cannot take lease "x" as replicated: ...".
func (e *replicationError) as(what string) error {
	out := *e
	out.msg = what + " as replicated: " + e.msg
	return &out
}

// remoteApply is sent in front of a take or renewal, in the same implicit
// transaction, so that the commit uses it and it ends with the commit.
const remoteApply = `SELECT pg_catalog.set_config('synchronous_commit', 'remote_apply', true)`

// standbysSQL reads, on the primary: the position to wait for (@target, or when
// NULL the flush position now, at or past what this session committed
// last), this role, whether it may read the standbys' positions, how many
// physical standbys stream, whether all of them have replayed that far,
// and the slowest one's replay position.
const standbysSQL = `WITH target AS (SELECT coalesce(@target::pg_lsn, pg_catalog.pg_current_wal_flush_lsn()) AS lsn)
SELECT t.lsn::text AS target, current_user::text AS role, pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') AS visible,
  count(r.pid) AS streaming, coalesce(bool_and(r.replay_lsn >= t.lsn), false) AS replayed, coalesce(min(r.replay_lsn)::text, '') AS slowest
FROM target t LEFT JOIN pg_catalog.pg_stat_replication r ON r.state = 'streaming' AND r.replay_lsn IS NOT NULL
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
GROUP BY t.lsn`

// Polls of pg_stat_replication start this soon after the commit (a
// standby on a healthy network replays and reports within a millisecond
// or two) and back off to at most replayPollMax.
const (
	replayPollMin = time.Millisecond
	replayPollMax = 50 * time.Millisecond
)

// oneConn is a single connection: what a replicated take or renewal runs
// on, so that the positions it reads after its commit are its server's.
type oneConn interface {
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// replicaSession is the DB a take or renewal uses under
// WithRequireReplicated: one connection (the caller's own, one held from
// the pool until done, or a session's, pinned), on which every Query
// commits with remote_apply, and replayed then waits for the standbys.
type replicaSession struct {
	pool   *pgxpool.Pool // nil: conn is the caller's own connection
	pooled *pgxpool.Conn
	// sess, when set, is a session whose connection every Query pins
	// anew (conn), so that the standbys are read on the connection that
	// committed, never on one made since.
	sess *session.Conn
	conn oneConn
}

// replicaDB returns db as it is without WithRequireReplicated, and
// otherwise a replicaSession on one of its connections; done ends it.
func (s *Store) replicaDB(db querier) (_ querier, done func()) {
	if !s.cfg.requireReplicated {
		return db, func() {}
	}
	rs := &replicaSession{}
	switch c := db.(type) {
	case *pgxpool.Pool:
		rs.pool = c
	case *session.Conn:
		rs.sess = c
	case oneConn:
		rs.conn = c
	}
	return rs, rs.done
}

// replicated is replicaDB for a take: it also refuses at once, before
// anything is written, when no standby streams or the role cannot see them.
func (s *Store) replicated(ctx context.Context, db querier, job string) (_ querier, done func(), err error) {
	db, done = s.replicaDB(db)
	rs, ok := db.(*replicaSession)
	if !ok {
		return db, done, nil
	}
	if _, err := rs.use(ctx); err != nil {
		return db, done, fmt.Errorf("cannot take lease %q: %w", job, pgerr.Classify(err))
	}
	st, rerr := rs.standbys(ctx, "0/0")
	if rerr == nil {
		rerr = st.refusal()
	}
	if rerr != nil {
		err = rerr.as(fmt.Sprintf("cannot take lease %q", job))
		s.cfg.observer.Failed(err)
	}
	return db, done, err
}

// standbysReady is replicated's check alone, for a standby to refuse at
// the start what it would refuse when the time came to take over.
func (s *Store) standbysReady(ctx context.Context, job string) error {
	_, done, err := s.replicated(ctx, s.db, job)
	done()
	return err
}

// confirmed returns l once the standbys have replayed its take, made on
// db; otherwise it hands l back and says why.
func (s *Store) confirmed(ctx context.Context, db querier, l *Lease) (*Lease, error) {
	rs, ok := db.(*replicaSession)
	if !ok {
		return l, nil
	}
	if rerr := rs.replayed(ctx); rerr != nil {
		err := rerr.as(fmt.Sprintf("cannot take lease %q (token %d)", l.job, l.token))
		s.cfg.observer.Failed(err)
		// A scheduled take claimed its time: the hand-back records it as a
		// run that could not start, so that the time is accounted for.
		var end End
		if !l.scheduledAt.IsZero() {
			end.Outcome = OutcomeCouldNotStart
		}
		if rerr := l.AbandonWith(context.WithoutCancel(ctx), end); rerr != nil {
			s.log.Debug().Err(rerr).Str("job", l.job).Msg("cannot hand back a take the standbys did not confirm; it expires after its TTL")
		}
		return nil, err
	}
	return l, nil
}

// replayed returns nil once the standbys have replayed l's renewal, made
// on db, and otherwise why not (a failed renewal).
func (s *Store) replayed(ctx context.Context, db querier, l *Lease) error {
	rs, ok := db.(*replicaSession)
	if !ok {
		return nil
	}
	if rerr := rs.replayed(ctx); rerr != nil {
		err := rerr.as(fmt.Sprintf("cannot renew lease %q", l.job))
		s.cfg.observer.Failed(err)
		return err
	}
	return nil
}

// use returns the session's connection, holding a fresh one from the pool
// when it has none or the one it had broke.
func (rs *replicaSession) use(ctx context.Context) (oneConn, error) {
	switch {
	case rs.sess != nil:
		rs.conn = rs.sess.Pin()
		return rs.conn, nil
	case rs.pool == nil && rs.conn == nil:
		return nil, errUnsupportedDB
	case rs.pool == nil || rs.pooled != nil && !rs.pooled.Conn().IsClosed():
		return rs.conn, nil
	}
	rs.done()
	c, err := rs.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	rs.pooled, rs.conn = c, c
	return c, nil
}

// done gives a connection held from the pool back (a broken one is
// dropped by the pool).
func (rs *replicaSession) done() {
	if rs.pooled != nil {
		rs.pooled.Release()
		rs.pooled, rs.conn = nil, nil
	}
}

// Query runs sql in one pipeline behind remoteApply. Its rows end at the
// end of the implicit transaction: a failed commit must not pass for a
// take or renewal.
func (rs *replicaSession) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := rs.use(ctx)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue(remoteApply)
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &pipelineRows{Rows: rows, br: br}, nil
}

// standbyState is one read of standbysSQL.
type standbyState struct {
	Target, Role, Slowest string
	Visible               bool
	Streaming             int
	Replayed              bool
}

// standbys reads the standbys' state against target ("" for the flush
// position now), on the connection as it is: after a commit, a connection
// that broke must not be replaced by one that may reach another server.
func (rs *replicaSession) standbys(ctx context.Context, target string) (standbyState, *replicationError) {
	if rs.conn == nil {
		return standbyState{}, &replicationError{msg: "the connection that committed was given back"}
	}
	var t *string
	if target != "" {
		t = &target
	}
	st, err := queryOne[standbyState](ctx, rs.conn, standbysSQL, pgx.StrictNamedArgs{"target": t})
	if err != nil {
		err = pgerr.Classify(err)
		return st, &replicationError{msg: "cannot read pg_stat_replication: " + err.Error(), cause: err, readFailed: true}
	}
	return st, nil
}

// refusal says why no take or renewal can be confirmed, or nil.
func (st standbyState) refusal() *replicationError {
	switch {
	case !st.Visible:
		role := pgx.Identifier{st.Role}.Sanitize()
		return &replicationError{hidden: true, msg: fmt.Sprintf(
			"role %s cannot read the standbys' replay positions in pg_stat_replication: GRANT pg_monitor TO %s (or connect as a superuser)", role, role)}
	case st.Streaming == 0:
		return &replicationError{msg: "no standby streams from the primary (pg_stat_replication shows none in state streaming)"}
	}
	return nil
}

// replayed waits until every streaming standby has replayed what the
// session committed last, or ctx ends.
func (rs *replicaSession) replayed(ctx context.Context) *replicationError {
	began := time.Now()
	st, err := rs.standbys(ctx, "")
	for delay := replayPollMin; err == nil; delay = min(2*delay, replayPollMax) {
		if err = st.refusal(); err != nil || st.Replayed {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		var next standbyState
		if next, err = rs.standbys(ctx, st.Target); err == nil {
			st = next
		}
		if ctx.Err() != nil {
			return &replicationError{cause: ctx.Err(), msg: fmt.Sprintf(
				"not replayed in time (%s): the slowest of %d standbys streaming had replayed up to %s of %s",
				time.Since(began).Round(time.Millisecond), st.Streaming, st.Slowest, st.Target)}
		}
	}
	return err
}

// errUnsupportedDB is a replicated take's or renewal's error on a DB that
// is neither a pool nor a single connection.
var errUnsupportedDB = errors.New("WithRequireReplicated needs a *pgxpool.Pool, a session (ConnectSession) or a single connection (*pgx.Conn, *pgxpool.Conn, pgx.Tx)")
