package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redbite/leasewrap/lease/internal/pgerr"
	"github.com/redbite/leasewrap/lease/schema"
)

// Outcomes of a run, as the history records them. The list may grow;
// readers should show an outcome they do not know as it is.
const (
	// OutcomeExited: the command exited on its own; ExitCode says how.
	OutcomeExited = "exited"
	// OutcomeSignalled: the command was ended by a signal (exit code 128+N).
	OutcomeSignalled = "signalled"
	// OutcomeLost: the lease was lost while the command ran and it was
	// stopped, or its holder never came back to release it (a crash, a
	// cut): then the next holder closed the run, at its lease's expiry.
	OutcomeLost = "lost"
	// OutcomeStopped: an operator released the lease (leasewrap release
	// --id) and the command was stopped.
	OutcomeStopped = "stopped"
	// OutcomeCouldNotStart: the lease was taken, but the command could not
	// be executed or the lease was in doubt before it started.
	OutcomeCouldNotStart = "could_not_start"
	// OutcomeTimedOut: the command ran past --max-runtime and was stopped.
	OutcomeTimedOut = "timed_out"
)

// DefaultHistoryKeep is how long runs stay in the history.
const DefaultHistoryKeep = 30 * 24 * time.Hour

// pruneBatch is the most rows one release deletes from the history.
const pruneBatch = 100

// ErrNoHistory means there is no history table (yet).
var ErrNoHistory = errors.New("no run history")

// WithHistoryKeep sets how long finished runs stay in the history table
// (default DefaultHistoryKeep); 0 keeps them for ever. Each release deletes
// at most a small batch of older runs.
func WithHistoryKeep(d time.Duration) Option { return func(c *config) { c.historyKeep = d } }

// historyStatements are the statements that also write the history.
type historyStatements struct {
	acquire, acquireSlots, release, recordAttempt string
	prune                                         bool
}

// useHistory returns the take and release statements that record runs,
// when the history table is there and this role may write to it;
// otherwise it says once why runs are not recorded, counts it, and
// returns nil.
func (s *Store) useHistory(hs schema.HistoryState) *historyStatements {
	name := s.objects.History
	switch {
	case hs.Problem != nil:
		s.historyFailed(fmt.Errorf("%w (fix or drop it, then run leasewrap migrate)", hs.Problem))
		return nil
	case !hs.Complete:
		return nil // ensureSchema warned
	case !hs.CanWrite:
		s.historyFailed(fmt.Errorf("this role may not INSERT into and SELECT from %s (GRANT SELECT, INSERT, DELETE ON %s)", name, name))
		return nil
	}
	prune := s.cfg.historyKeep > 0
	if prune && !hs.CanPrune {
		s.log.Warn().Str("table", s.cfg.table).Msgf(
			"old runs are not pruned: this role may not DELETE from %s (GRANT DELETE ON %s)", name, name)
		prune = false
	}
	return s.historyStatements(prune)
}

// historyStatements builds the statements that also write the history, with
// pruning or without.
func (s *Store) historyStatements(prune bool) *historyStatements {
	table, name := s.table.Sanitize(), s.objects.History
	return &historyStatements{
		acquire:      acquireSQL(table, name),
		acquireSlots: acquireSlotsSQL(table, name),
		release:      releaseSQL(table, name, prune),
		// An attempt that ended while a retry follows: $1 row, $2 holder,
		// $3 token, $4 job, $5 slot, $6 attempt, $7 exit code, $8 outcome.
		// The lease row forgets the attempt's start, so that a crash during
		// the wait for the next one closes no run twice.
		recordAttempt: `WITH ended AS (
  UPDATE ` + table + ` AS l SET last_started_at = NULL, last_exit_code = $7::integer
  FROM (SELECT last_started_at FROM ` + table + ` WHERE job_name = $1::text) AS o
  WHERE l.job_name = $1::text AND l.holder = $2::text AND l.fencing_token = $3::bigint
  RETURNING l.holder, l.fencing_token, o.last_started_at AS started)
INSERT INTO ` + name + ` (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome)
SELECT $4::text, $5::integer, holder, fencing_token, $6::integer, coalesce(started, now()), now(), $7::integer, $8::text
FROM ended`,
		prune: prune,
	}
}

// readableHistory checks, without creating anything, that the lease table
// is there (a mistyped --table is not an empty history) and that the
// history table is there and of our shape, and returns its quoted name.
func (s *Store) readableHistory(ctx context.Context) (string, error) {
	name := s.objects.History
	st, err := s.objects.Read(ctx, s.db)
	switch {
	case err != nil:
		return "", err
	case !st.TableExists:
		return "", s.noTable()
	case st.History.Problem != nil:
		return "", fmt.Errorf("run history unavailable: %w", st.History.Problem)
	case !st.History.Exists:
		return "", fmt.Errorf("no history table %s (run leasewrap migrate, or a job with this version): %w", name, ErrNoHistory)
	}
	return name, nil
}

// HistoryObserver is an Observer that is also told when runs cannot be
// recorded in the history (the table is broken, missing, or this role may
// not write to it), each time leasewrap gives up recording them.
type HistoryObserver interface {
	HistoryFailed(err error)
}

// historyFailed says, once per failure, that runs are no longer recorded
// and why, and tells the observer. The lease is not affected.
func (s *Store) historyFailed(err error) {
	s.log.Warn().Str("table", s.cfg.table).Str("history_table", s.objects.History).
		Msgf("runs are not recorded, the job runs on under its lease: %v", err)
	if o, ok := s.cfg.observer.(HistoryObserver); ok {
		o.HistoryFailed(err)
	}
}

// withoutHistory is called with err, the failure of a statement that also
// wrote the history. When err may be the history's (a statement the server
// refused, not a dropped connection or a timeout), it runs plain, the same
// statement without the history: if that one succeeds, the history was at
// fault, and runs are no longer recorded (said once, and counted). It
// returns plain's error, or err when plain was not tried.
func (s *Store) withoutHistory(ctx context.Context, err error, plain func() error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || ctx.Err() != nil || retryable(err) {
		return err
	}
	perr := plain()
	// Swap: two statements that failed at once say it once.
	if (perr == nil || errors.Is(perr, pgx.ErrNoRows)) && s.dropHistory() {
		s.historyFailed(fmt.Errorf("writing to %s failed: %w", s.objects.History, pgerr.Classify(err)))
	}
	return perr
}

// Run is one finished run of a job, as the history keeps it. Times come
// from the database clock. A run closed by the next holder (its own holder
// never released) has OutcomeLost and finishes when its lease expired.
type Run struct {
	Job          string
	Slot         int
	Holder       string
	FencingToken int64
	Attempt      int
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     *int
	Outcome      string
}

// Succeeded reports whether the run exited on its own with status 0, the
// one outcome that counts as a success (in SQL: outcome = 'exited' AND
// exit_code = 0).
func (r Run) Succeeded() bool {
	return r.Outcome == OutcomeExited && r.ExitCode != nil && *r.ExitCode == 0
}

// HistoryQuery selects runs: Job's only when set, those that finished at
// or after Since when set, at most Limit (all when 0), newest first.
type HistoryQuery struct {
	Job   string
	Since time.Time
	Limit int
}

// History reads finished runs from the history table. It never creates
// the table: without one it returns an error wrapping ErrNoHistory.
func (s *Store) History(ctx context.Context, q HistoryQuery) ([]Run, error) {
	name, err := s.readableHistory(ctx)
	if err != nil {
		return nil, err
	}
	var job *string
	if q.Job != "" {
		job = &q.Job
	}
	var since *time.Time
	if !q.Since.IsZero() {
		since = &q.Since
	}
	var limit *int
	if q.Limit > 0 {
		limit = &q.Limit
	}
	rows, err := s.db.Query(ctx, `SELECT job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome
FROM `+name+` WHERE ($1::text IS NULL OR job_name = $1::text) AND ($2::timestamptz IS NULL OR finished_at >= $2::timestamptz)
ORDER BY finished_at DESC, started_at DESC, fencing_token DESC LIMIT $3::integer`, job, since, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read history table %s: %w", ErrHistoryUnavailable, name, pgerr.Classify(err))
	}
	var (
		out []Run
		r   Run
	)
	_, err = pgx.ForEachRow(rows, []any{&r.Job, &r.Slot, &r.Holder, &r.FencingToken, &r.Attempt, &r.StartedAt,
		&r.FinishedAt, &r.ExitCode, &r.Outcome}, func() error {
		out = append(out, r)
		r = Run{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read history table %s: %w", ErrHistoryUnavailable, name, err)
	}
	return out, nil
}

// releaseWithoutHistory is the release that failed with err while it also
// recorded the run, run again without recording it when the history was at
// fault (see withoutHistory): the lease is handed back either way. args
// are the release's; the plain release takes the first seven.
func (s *Store) releaseWithoutHistory(ctx context.Context, err error, args []any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err = s.withoutHistory(ctx, err, func() error {
		var perr error
		tag, perr = s.db.Exec(ctx, s.sql.release, args[:7]...)
		return perr
	})
	return tag, err
}
