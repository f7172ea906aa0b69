package inspect

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
	"github.com/redbite/leasewrap/schema"
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
	// A scheduled time missed or skipped is not a run. LastCounted is the
	// newest that counts in the judgement (Run.Counts: not stopped).
	LastRun, LastCounted *Run
	// LastSuccess is when the newest run that exited with status 0
	// (OutcomeExited, exit code 0) finished, nil when none did, and
	// LastSuccessBy its holder.
	LastSuccess   *time.Time
	LastSuccessBy string
	// Runs counts the runs that finished at or after Since, by outcome,
	// and the scheduled times nobody ran (missed, skipped, paused) in that
	// window: a history row that summarises a long outage counts each
	// time of the job's schedule it stands for. An outcome with no run is
	// not in the map.
	Runs map[string]int
	// Since is the start of the window Runs counts: the database's now()
	// less the window asked for.
	Since time.Time
	// Schedule is the job's schedule in its canonical form ("": none).
	Schedule string
	// ScheduledSince is when the job's schedule was recorded (its first
	// scheduler, or leasewrap reschedule), nil when that is not recorded.
	ScheduledSince *time.Time
	// Paused is the job's pause in force, nil when it is not paused.
	Paused *lease.Pause
	// Now is the database clock the summary was read at.
	Now time.Time
	// Standby is the first live standby of a job no slot of which is
	// held, taking over (TakingOver), "" when none is.
	Standby string
	// Verdict is the job's state, as Judge decides it with ViewPolicy.
	Verdict Verdict
}

// summarySQL reads every job of the lease table with its history, in one
// statement and one snapshot: @window is the window of the run counts, in
// microseconds, @job the job (NULL: every job), @claims the claims table,
// which it says whether this role may read. The jobs come from the lease table (a small
// table, one row per slot). Each job's newest run and newest success are
// read from the (job_name, finished_at) index, newest first, so that a
// scrape costs the same however long the history has grown; the job is
// matched as a range (>= and <=, not =) so that the planner cannot drop
// job_name from the ORDER BY and walk the (finished_at) index back through
// every job's runs instead, as it does when one job has most of them. The
// last success walks back through the job's runs until one exited 0: a job
// that keeps failing costs what the history keeps of it (--history-keep).
// The counts read the last window's runs once, by the (finished_at) index;
// with them, the rows that each summarise missed times (started_at their
// first time, finished_at their last), which Go counts by the schedule
// (win, read twice, is computed once).
var summarySQL = `WITH rows AS (
  SELECT ` + schema.BaseJob + ` AS job, holder, expires_at, expires_at > now() AS live, coalesce(slots, 1) AS slots, coalesce(slot, 1) AS slot,
    schedule, {scheduled_since} AS scheduled_since
  FROM {lease}),
jobs AS (
  SELECT job, max(slots) FILTER (WHERE slot = 1) AS slots, max(schedule) FILTER (WHERE slot = 1) AS schedule,
    max(scheduled_since) FILTER (WHERE slot = 1) AS scheduled_since, count(*) FILTER (WHERE live) AS held,
    max(expires_at) AS last_expiry,
    coalesce(array_agg(DISTINCT holder ORDER BY holder) FILTER (WHERE live), '{}') AS holders
  FROM rows WHERE @job::text IS NULL OR job = @job::text GROUP BY job),
win AS (
  SELECT job_name, outcome, started_at, finished_at FROM {history}
  WHERE finished_at >= now() - @window::bigint * interval '1 microsecond'),
recent AS (
  SELECT job_name, array_agg(outcome ORDER BY outcome) AS outcomes, array_agg(n ORDER BY outcome) AS counts
  FROM (SELECT job_name, outcome, count(*)::integer AS n FROM win GROUP BY job_name, outcome) c
  GROUP BY job_name),
spans AS (
  SELECT job_name, array_agg(outcome) AS outcomes, array_agg(started_at) AS firsts, array_agg(finished_at) AS lasts
  FROM win WHERE outcome IN ` + lease.NotRunSQL + ` AND started_at < finished_at GROUP BY job_name)
SELECT j.job, coalesce(j.slots, 1) AS slots, j.held AS slots_held, j.holders, now() - @window::bigint * interval '1 microsecond' AS since,
  lr.*, ls.finished_at AS last_success, ls.holder AS last_success_by, coalesce(r.outcomes, '{}') AS outcomes, coalesce(r.counts, '{}') AS counts,
  coalesce(sp.outcomes, '{}') AS span_outcomes, coalesce(sp.firsts, '{}') AS span_firsts, coalesce(sp.lasts, '{}') AS span_lasts,
  coalesce(j.schedule, '') AS schedule, j.scheduled_since, now() AS now, j.last_expiry,
  lc.holder AS counted_holder, lc.finished_at AS counted_finished_at, lc.exit_code AS counted_exit_code, lc.outcome AS counted_outcome,
  coalesce(pg_catalog.has_table_privilege(pg_catalog.to_regclass(@claims::text), 'SELECT'), false) AS claims,
  p.*
FROM jobs j
LEFT JOIN LATERAL (SELECT ` + pauseColumns + `,
  CASE WHEN j.held = 0 THEN ` + lease.QueueSQL("l") + ` END AS queue
  FROM {lease} l WHERE job_name = j.job) p ON true
LEFT JOIN LATERAL (
  SELECT ` + runColumns + `, {stopped_by} AS stopped_by FROM {history} h
  WHERE h.job_name >= j.job AND h.job_name <= j.job
    AND h.outcome NOT IN ` + lease.NotRunSQL + `
  ORDER BY h.job_name DESC, h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT 1) lr ON true
LEFT JOIN LATERAL (
  SELECT holder, finished_at, exit_code, outcome FROM {history} h
  WHERE h.job_name >= j.job AND h.job_name <= j.job AND ` + countsSQL + `
  ORDER BY h.job_name DESC, h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT 1) lc ON true
LEFT JOIN LATERAL (
  SELECT finished_at, holder FROM {history} h
  WHERE h.job_name >= j.job AND h.job_name <= j.job AND ` + succeededSQL + `
  ORDER BY h.job_name DESC, h.finished_at DESC LIMIT 1) ls ON true
LEFT JOIN recent r ON r.job_name = j.job
LEFT JOIN spans sp ON sp.job_name = j.job
ORDER BY j.job`

// Summaries reads every job of the lease table with what the history says
// of it, counting in Runs the runs that finished within window, and
// judges each (Verdict). It only reads (SELECTs, which a role with
// nothing but SELECT on the tables may run) and never creates or alters a
// table: without the lease table it returns an error matching ErrNoTable,
// without the history table one wrapping ErrNoHistory. It reads the
// summary in one statement and, for the jobs with a schedule and the
// origin of each newest run, the claims in one more.
func (r *Reader) Summaries(ctx context.Context, window time.Duration) ([]JobSummary, error) {
	return r.summaries(ctx, nil, window)
}

// Summary is Summaries of job alone; for a job without a lease row it
// returns an error matching lease.ErrNoJob.
func (r *Reader) Summary(ctx context.Context, job string, window time.Duration) (JobSummary, error) {
	if err := lease.CheckJob(job); err != nil {
		return JobSummary{}, err
	}
	out, err := r.summaries(ctx, &job, window)
	if err != nil {
		return JobSummary{}, err
	}
	if len(out) == 0 {
		return JobSummary{}, fmt.Errorf("job %q: %w", job, lease.ErrNoJob)
	}
	return out[0], nil
}

func (r *Reader) summaries(ctx context.Context, job *string, window time.Duration) ([]JobSummary, error) {
	sql := &r.sql
	// A catalog that cannot be read is left to the summary's own error.
	if hs, err := r.objects.ReadHistory(ctx, r.db); err == nil {
		// A history leasewrap cannot write to (a NOT NULL column added
		// by hand, a type changed) records no run: its newest runs would
		// judge the job on stale facts.
		if hs.Problem != nil {
			return nil, fmt.Errorf("run history unavailable: %w", hs.Problem)
		}
		sql = r.forTable(hs)
	}
	args := pgx.StrictNamedArgs{"window": window.Microseconds(), "job": job, "claims": r.objects.Claims}
	rows, _ := r.db.Query(ctx, sql.summary, args)
	found, err := pgx.CollectRows(rows, pgx.RowToStructByName[summaryRow])
	if pgerr.SQLState(err) == pgerr.CodeUndefinedColumn {
		// A lease table of an earlier version, not upgraded yet, is read
		// as it is (looked up only then: the summary is every scrape's).
		if st, readErr := r.objects.Read(ctx, r.db); readErr == nil {
			rendered := render(r.objects, append(slices.Clone(st.MissingColumns), st.History.MissingColumns...))
			rows, _ = r.db.Query(ctx, rendered.summary, args)
			found, err = pgx.CollectRows(rows, pgx.RowToStructByName[summaryRow])
		}
	}
	if err != nil {
		return nil, r.summaryError(ctx, err)
	}
	out := make([]JobSummary, len(found))
	claims := false
	for i := range found {
		out[i], claims = found[i].summary(), found[i].Claims
	}
	if err := r.judge(ctx, out, claims); err != nil {
		return nil, err
	}
	return out, nil
}

// summaryRow reads a row of summarySQL.
type summaryRow struct {
	Job              string
	Slots, SlotsHeld int
	Holders          []string
	Since            time.Time
	// the newest run, and who stopped it
	nullableRun
	StoppedBy *string
	// the newest run that counts
	CountedHolder     *string
	CountedFinishedAt *time.Time
	CountedExitCode   *int
	CountedOutcome    *string
	// the latest expiry of the job's rows
	LastExpiry time.Time
	// the job's live standbys (lease.QueueSQL) when no slot is held
	Queue         []byte
	LastSuccess   *time.Time
	LastSuccessBy *string
	// how many runs of each outcome the window has
	Outcomes []string
	Counts   []int
	// the history rows in the window that each stand for the scheduled
	// times nobody ran from SpanFirsts[i] to SpanLasts[i]
	SpanOutcomes          []string
	SpanFirsts, SpanLasts []time.Time
	Schedule              string
	ScheduledSince        *time.Time
	Now                   time.Time
	// whether this role may read the claims table
	Claims bool
	pauseRow
}

func (row *summaryRow) summary() JobSummary {
	js := JobSummary{Job: row.Job, Slots: row.Slots, SlotsHeld: row.SlotsHeld, Holders: row.Holders, Since: row.Since,
		LastRun: row.run(row.Job), LastSuccess: row.LastSuccess, LastSuccessBy: deref(row.LastSuccessBy),
		Runs: make(map[string]int, len(row.Outcomes)), Schedule: row.Schedule, ScheduledSince: row.ScheduledSince, Now: row.Now, Paused: row.pause()}
	for i, outcome := range row.Outcomes {
		js.Runs[outcome] = row.Counts[i]
	}
	js.LastRun.stoppedBy(row.StoppedBy)
	if row.CountedFinishedAt != nil {
		js.LastCounted = &Run{Job: row.Job, Holder: deref(row.CountedHolder), FinishedAt: *row.CountedFinishedAt,
			ExitCode: row.CountedExitCode, Outcome: deref(row.CountedOutcome)}
	}
	if row.Queue != nil {
		// A queue that cannot be read has no standby to wait for.
		queue, _ := lease.ParseQueue(row.Queue)
		js.Standby = TakingOver(queue, row.Now.Sub(row.LastExpiry))
	}
	row.countSpans(&js)
	return js
}

// countSpans adds to js.Runs the times each span stands for beyond its
// own row, from the window's start on, by the job's schedule; a schedule
// this version cannot read leaves each span counted once.
func (row *summaryRow) countSpans(js *JobSummary) {
	if len(row.SpanOutcomes) == 0 {
		return
	}
	s, err := schedule.Parse(js.Schedule, "")
	if err != nil {
		return
	}
	for i, outcome := range row.SpanOutcomes {
		first := row.SpanFirsts[i]
		if first.Before(js.Since) {
			first = js.Since
		}
		if n := s.Count(first.Add(-time.Nanosecond), row.SpanLasts[i]); n > 1 {
			js.Runs[outcome] += int(n - 1)
		}
	}
}

// factsSQL reads, for each job of @jobs, how its latest due time in @dues
// (NULL: none) is accounted for, as Scheduled does, and the scheduled time
// and claim of its newest run, which finished at @finished under token
// @tokens, attempt @attempts (NULL: no run): each through the claims'
// primary key and the history's (job_name, finished_at) index.
const factsSQL = `SELECT d.n, dc.outcome AS claim, dc.holder AS claim_by,
  (SELECT min(scheduled_at) FROM {claims} WHERE job_name = d.job) AS first_claim,
  r.*, lh.scheduled_at AS last_scheduled_at, lc.outcome AS last_claim, lc.claimed_at AS last_claimed_at
FROM unnest(@jobs::text[], @dues::timestamptz[], @finished::timestamptz[], @tokens::bigint[], @attempts::integer[]) WITH ORDINALITY
  AS d(job, due, finished, token, attempt, n)
LEFT JOIN {claims} dc ON dc.job_name = d.job AND dc.scheduled_at = d.due
LEFT JOIN LATERAL (SELECT ` + runColumns + ` FROM {history} WHERE d.due IS NOT NULL AND job_name = d.job AND finished_at >= d.due
  AND scheduled_at = d.due ORDER BY finished_at DESC LIMIT 1) r ON true
LEFT JOIN LATERAL (SELECT scheduled_at FROM {history} WHERE d.finished IS NOT NULL AND job_name = d.job
  AND finished_at = d.finished AND fencing_token = d.token AND attempt = d.attempt LIMIT 1) lh ON true
LEFT JOIN {claims} lc ON lc.job_name = d.job AND lc.scheduled_at = lh.scheduled_at`

// judge reads what the summaries lack for a verdict (the accounts of the
// due times, the origins of the newest runs) and judges each job.
// claims says whether this role may read the claims table.
func (r *Reader) judge(ctx context.Context, out []JobSummary, claims bool) error {
	facts := make([]Facts, len(out))
	var (
		jobs     []string
		dues     []*time.Time
		finished []*time.Time
		tokens   []*int64
		attempts []*int
	)
	for i := range out {
		js := &out[i]
		facts[i] = Facts{Job: js.Job, Now: js.Now, Known: true, Held: js.SlotsHeld > 0, Holders: js.Holders, Standby: js.Standby,
			Schedule: js.Schedule, Paused: js.Paused, LastRun: js.LastRun, LastCounted: js.LastCounted,
			LastSuccess: js.LastSuccess, LastSuccessBy: js.LastSuccessBy, ScheduledSince: js.ScheduledSince}
		var due *time.Time
		if js.Schedule != "" {
			at, err := DueTime(js.Schedule, js.Now)
			switch {
			case err != nil:
				facts[i].DueErr = fmt.Errorf("cannot read its schedule %q: %w", js.Schedule, err)
			case !at.IsZero():
				due = &at
			}
		}
		if due == nil && js.LastRun == nil {
			continue
		}
		jobs, dues = append(jobs, js.Job), append(dues, due)
		if run := js.LastRun; run != nil {
			finished, tokens, attempts = append(finished, &run.FinishedAt), append(tokens, &run.FencingToken), append(attempts, &run.Attempt)
		} else {
			finished, tokens, attempts = append(finished, nil), append(tokens, nil), append(attempts, nil)
		}
	}
	if len(jobs) > 0 {
		if claims {
			if err := r.readFacts(ctx, out, facts, jobs, dues, finished, tokens, attempts); err != nil {
				return err
			}
		} else {
			// No job with a schedule has run on this table (or its claims
			// were dropped): a newest run of a job without one was plain.
			noClaims := fmt.Errorf("no claims table %s that this role may read", r.objects.Claims)
			for i := range facts {
				if facts[i].Schedule != "" && facts[i].DueErr == nil {
					facts[i].DueErr = noClaims
				}
				if out[i].LastRun != nil && out[i].Schedule == "" {
					out[i].LastRun.Origin = OriginPlain
				}
			}
		}
	}
	for i := range out {
		out[i].Verdict = Judge(facts[i], ViewPolicy)
	}
	return nil
}

// factsRow reads a row of factsSQL: the nth job's.
type factsRow struct {
	N              int64
	Claim, ClaimBy *string
	FirstClaim     *time.Time
	// the run of the due time
	nullableRun
	// the claim of the newest run's scheduled time
	LastScheduledAt *time.Time
	LastClaim       *string
	LastClaimedAt   *time.Time
}

// readFacts reads factsSQL into facts (the accounts) and out (the
// origins of the newest runs).
func (r *Reader) readFacts(ctx context.Context, out []JobSummary, facts []Facts, jobs []string, dues, finished []*time.Time,
	tokens []*int64, attempts []*int) error {
	index := make(map[string]int, len(out))
	for i := range out {
		index[out[i].Job] = i
	}
	rows, err := r.db.Query(ctx, r.sql.facts, pgx.StrictNamedArgs{"jobs": jobs, "dues": dues, "finished": finished, "tokens": tokens, "attempts": attempts})
	if err != nil {
		return fmt.Errorf("cannot read claims table %s and history table %s: %w", r.objects.Claims, r.objects.History, pgerr.Classify(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByName[factsRow])
	if err != nil {
		return fmt.Errorf("cannot read claims table %s and history table %s: %w", r.objects.Claims, r.objects.History, pgerr.Classify(err))
	}
	for _, f := range found {
		if f.N < 1 || int(f.N) > len(jobs) {
			return fmt.Errorf("cannot read claims table %s and history table %s: row %d of %d", r.objects.Claims, r.objects.History, f.N, len(jobs))
		}
		job := jobs[f.N-1]
		i, ok := index[job]
		if !ok {
			continue
		}
		js := &out[i]
		if due := dues[f.N-1]; due != nil {
			facts[i].Due = &Account{At: *due, Now: js.Now, Claim: deref(f.Claim), By: deref(f.ClaimBy), Run: f.run(job)}
			facts[i].FirstClaim = f.FirstClaim
		}
		if js.LastRun != nil {
			js.LastRun.Origin = originOf(f.LastScheduledAt, f.LastClaim, f.LastClaimedAt, js.Schedule)
		}
	}
	return nil
}

// tablesSQL reads whether the lease table @table and the history table
// @history (quoted) are there.
const tablesSQL = `SELECT to_regclass(@table) IS NOT NULL, to_regclass(@history) IS NOT NULL`

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
	if lookErr := r.db.QueryRow(ctx, r.sql.tables, pgx.StrictNamedArgs{"table": table, "history": history}).
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
