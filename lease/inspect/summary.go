package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/internal/pgerr"
	"github.com/redbite/leasewrap/lease/schema"
)

// JobSummary is one job as a monitoring system sees it: its lease rows now
// and its runs in the history. Times come from the database clock.
type JobSummary struct {
	// Job is the job's name; the rows of its slots k > 1 ("job#k") are
	// counted under it.
	Job string
	// Slots is the number of slots the job's rows record (1 for a plain
	// lease); SlotsHeld how many of them are live now, and Holders the
	// distinct holders of those, sorted.
	Slots, SlotsHeld int
	Holders          []string
	// LastRun is the newest finished run, nil when the history has none.
	// A scheduled time missed or skipped is not a run.
	LastRun *Run
	// LastSuccess is when the newest run that exited with status 0
	// (OutcomeExited, exit code 0) finished, nil when none did.
	LastSuccess *time.Time
	// Runs counts the runs that finished at or after Since, by outcome.
	// An outcome with no run is not in the map.
	Runs map[string]int
	// Since is the start of the window Runs counts: the database's now()
	// less the window asked for.
	Since time.Time
	// Schedule is the job's schedule in its canonical form ("": none).
	Schedule string
}

// summarySQL reads every job of the lease table with its history, in one
// statement and one snapshot: $1 is the window of the run counts, in
// microseconds. The jobs come from the lease table (a small
// table, one row per slot). Each job's newest run and newest success are
// read from the (job_name, finished_at) index, newest first, so that a
// scrape costs the same however long the history has grown; the job is
// matched as a range (>= and <=, not =) so that the planner cannot drop
// job_name from the ORDER BY and walk the (finished_at) index back through
// every job's runs instead, as it does when one job has most of them. The
// last success walks back through the job's runs until one exited 0: a job
// that keeps failing costs what the history keeps of it (--history-keep).
// The counts read the last window's runs once, by the (finished_at) index.
const summarySQL = `WITH rows AS (
  SELECT ` + schema.BaseJob + ` AS job, holder, expires_at > now() AS live, coalesce(slots, 1) AS slots, coalesce(slot, 1) AS slot,
    schedule
  FROM {lease}),
jobs AS (
  SELECT job, max(slots) FILTER (WHERE slot = 1) AS slots, max(schedule) FILTER (WHERE slot = 1) AS schedule, count(*) FILTER (WHERE live) AS held,
    coalesce(array_agg(DISTINCT holder ORDER BY holder) FILTER (WHERE live), '{}') AS holders
  FROM rows GROUP BY job),
recent AS (
  SELECT job_name, array_agg(outcome ORDER BY outcome) AS outcomes, array_agg(n ORDER BY outcome) AS counts
  FROM (SELECT job_name, outcome, count(*)::integer AS n FROM {history}
    WHERE finished_at >= now() - $1::bigint * interval '1 microsecond' GROUP BY job_name, outcome) c
  GROUP BY job_name)
SELECT j.job, coalesce(j.slots, 1), j.held, j.holders, now() - $1::bigint * interval '1 microsecond',
  lr.slot, lr.holder, lr.fencing_token, lr.attempt, lr.started_at, lr.finished_at, lr.exit_code, lr.outcome,
  ls.finished_at, coalesce(r.outcomes, '{}'), coalesce(r.counts, '{}'), coalesce(j.schedule, '')
FROM jobs j
LEFT JOIN LATERAL (
  SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome FROM {history} h
  WHERE h.job_name >= j.job AND h.job_name <= j.job AND h.outcome NOT IN ('` + lease.OutcomeMissed + `', '` + lease.OutcomeSkipped + `')
  ORDER BY h.job_name DESC, h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT 1) lr ON true
LEFT JOIN LATERAL (
  SELECT finished_at FROM {history} h
  WHERE h.job_name >= j.job AND h.job_name <= j.job AND h.outcome = '` + lease.OutcomeExited + `' AND h.exit_code = 0
  ORDER BY h.job_name DESC, h.finished_at DESC LIMIT 1) ls ON true
LEFT JOIN recent r ON r.job_name = j.job
ORDER BY j.job`

// Summaries reads every job of the lease table with what the history says
// of it, counting in Runs the runs that finished within window. It only
// reads (one SELECT, which a role with nothing but SELECT on the two tables
// may run) and never creates or alters a table: without the lease table it
// returns an error matching ErrNoTable, without the history table one
// wrapping ErrNoHistory.
func (r *Reader) Summaries(ctx context.Context, window time.Duration) ([]JobSummary, error) {
	rows, err := r.db.Query(ctx, r.sql.summary, window.Microseconds())
	if err != nil {
		return nil, r.summaryError(ctx, err)
	}
	var (
		out     []JobSummary
		js      JobSummary
		last    nullableRun
		counts  []int
		reasons []string
	)
	dest := append([]any{&js.Job, &js.Slots, &js.SlotsHeld, &js.Holders, &js.Since}, last.dest()...)
	dest = append(dest, &js.LastSuccess, &reasons, &counts, &js.Schedule)
	_, err = pgx.ForEachRow(rows, dest, func() error {
		js.LastRun = last.run(js.Job)
		js.Runs = make(map[string]int, len(reasons))
		for i, outcome := range reasons {
			js.Runs[outcome] = counts[i]
		}
		out = append(out, js)
		js, last = JobSummary{}, nullableRun{}
		return nil
	})
	if err != nil {
		return nil, r.summaryError(ctx, err)
	}
	return out, nil
}

// summaryError says which table is missing when the summary found one
// missing, and names the tables otherwise.
func (r *Reader) summaryError(ctx context.Context, err error) error {
	table, history := r.objects.Lease, r.objects.History
	switch pgerr.SQLState(err) {
	case pgerr.CodeUndefinedTable:
	case pgerr.CodeUndefinedColumn:
		return fmt.Errorf("lease table %s or history table %s is of an older shape (run leasewrap migrate): %w", table, history, err)
	default:
		return fmt.Errorf("cannot read lease table %s and history table %s: %w", table, history, pgerr.Classify(err))
	}
	var hasTable, hasHistory bool
	if lookErr := r.db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`, table, history).
		Scan(&hasTable, &hasHistory); lookErr != nil {
		return fmt.Errorf("cannot read lease table %s and history table %s: %w", table, history, pgerr.Classify(err))
	}
	switch {
	case !hasTable:
		return r.noTable()
	case !hasHistory:
		return fmt.Errorf("no history table %s (run leasewrap migrate): %w", history, ErrNoHistory)
	}
	return fmt.Errorf("cannot read lease table %s and history table %s: %w", table, history, pgerr.Classify(err))
}
