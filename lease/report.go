package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/redbite/leasewrap/lease/internal/pgerr"
)

// Freshness is what the history says about a job's recent runs: its newest
// successful run and its newest run of any kind, with the database's clock.
type Freshness struct {
	Job string
	// Now is the database clock when it was read.
	Now time.Time
	// LastSuccess is the newest run that exited 0, or nil if none is kept.
	LastSuccess *Run
	// LastRun is the newest run, or nil if none is kept.
	LastRun *Run
}

// freshnessSQL reads both runs through the (job_name, finished_at) index:
// two probes, never a scan, however long the history.
const freshnessSQL = `SELECT now(),
  s.slot, s.holder, s.fencing_token, s.attempt, s.started_at, s.finished_at, s.exit_code, s.outcome,
  r.slot, r.holder, r.fencing_token, r.attempt, r.started_at, r.finished_at, r.exit_code, r.outcome
FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT * FROM %[1]s WHERE job_name = $1::text AND outcome = '` + OutcomeExited + `' AND exit_code = 0
  ORDER BY finished_at DESC LIMIT 1) s ON true
LEFT JOIN LATERAL (SELECT * FROM %[1]s WHERE job_name = $1::text ORDER BY finished_at DESC LIMIT 1) r ON true`

// Freshness reads job's newest successful run and newest run from the
// history. It never creates the table: without one it returns an error
// wrapping ErrNoHistory.
func (s *Store) Freshness(ctx context.Context, job string) (Freshness, error) {
	f := Freshness{Job: job}
	if err := CheckJob(job); err != nil {
		return f, err
	}
	name, err := s.readableHistory(ctx)
	if err != nil {
		return f, err
	}
	var success, last nullableRun
	err = s.db.QueryRow(ctx, fmt.Sprintf(freshnessSQL, name), job).Scan(append(append([]any{&f.Now}, success.dest()...), last.dest()...)...)
	if err != nil {
		return f, fmt.Errorf("%w: cannot read history table %s: %w", ErrHistoryUnavailable, name, pgerr.Classify(err))
	}
	f.LastSuccess, f.LastRun = success.run(job), last.run(job)
	return f, nil
}

// nullableRun scans a run that a LEFT JOIN may leave out.
type nullableRun struct {
	slot, attempt, exitCode *int
	holder, outcome         *string
	token                   *int64
	started, finished       *time.Time
}

func (n *nullableRun) dest() []any {
	return []any{&n.slot, &n.holder, &n.token, &n.attempt, &n.started, &n.finished, &n.exitCode, &n.outcome}
}

func (n *nullableRun) run(job string) *Run {
	if n.finished == nil {
		return nil
	}
	return &Run{Job: job, Slot: *n.slot, Holder: *n.holder, FencingToken: *n.token, Attempt: *n.attempt,
		StartedAt: *n.started, FinishedAt: *n.finished, ExitCode: n.exitCode, Outcome: *n.outcome}
}
