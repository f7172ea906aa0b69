package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
)

// Run is one finished run of a job, as the history keeps it. Times come
// from the database clock. A run closed by the next holder (its own holder
// never released) has lease.OutcomeLost and finishes when its lease
// expired.
type Run struct {
	Job  string
	Slot int
	// Holder is the holder that ran it; "" for a scheduled time nobody
	// ran (lease.NotRun), which no holder held: By says who accounted
	// for that one.
	Holder       string
	FencingToken int64
	Attempt      int
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     *int
	Outcome      string
	// ScheduledAt is the scheduled time the run was for, nil for a run
	// without a schedule.
	ScheduledAt *time.Time
	// OutputBytes is the size of the output the run kept (Reader.Output
	// reads it), 0 when it kept none.
	OutputBytes int
	// By says who: for a run with lease.OutcomeStopped, who asked for the
	// stop ("SIGTERM to leasewrap", "release by root@host"); for a
	// scheduled time nobody ran, who accounted for it: who paused the job
	// (paused), the holder whose run still held the lease (skipped), or
	// the instance that recorded it missed. "" for any other run, or when
	// not known.
	By string `db:"stopped_by"`
	// Origin is how the run came to be (OriginSchedule, OriginCatchUp,
	// OriginManual or OriginPlain), "" when that cannot be told: its
	// scheduled time's claim is gone. History and Summaries set it.
	Origin string `db:"-"`
}

// Succeeded reports whether the run exited on its own with status 0, the
// one outcome that counts as a success (in SQL: succeededSQL).
func (r Run) Succeeded() bool {
	return r.Outcome == lease.OutcomeExited && r.ExitCode != nil && *r.ExitCode == 0
}

// Counts reports whether the run counts in a job's judgement: a run
// leasewrap was asked to stop (lease.OutcomeStopped) is neither a success
// nor a failure of its command, and a scheduled time nobody ran is no run
// (in SQL: countsSQL).
func (r Run) Counts() bool {
	return r.Outcome != lease.OutcomeStopped && !lease.NotRun(r.Outcome)
}

// countsSQL is Counts over a history row.
const countsSQL = `outcome NOT IN ` + lease.NotRunSQL + ` AND outcome <> '` + lease.OutcomeStopped + `'`

// Stop says who stopped a run with lease.OutcomeStopped, in parentheses
// after a space, and "" for any other run or when not known.
func (r Run) Stop() string {
	if r.Outcome != lease.OutcomeStopped || r.By == "" {
		return ""
	}
	return " (" + escape.Printable(r.By) + ")"
}

// succeededSQL is Succeeded over a history row aliased h.
const succeededSQL = `h.outcome = '` + lease.OutcomeExited + `' AND h.exit_code = 0`

// HistoryQuery selects runs: Job's only when set, those that finished at
// or after Since when set, at most Limit (all when 0), newest first.
type HistoryQuery struct {
	Job   string
	Since time.Time
	Limit int
}

// historySQL reads finished runs, newest first: @job the job (NULL: every
// job), @since the earliest finish (NULL: any), @limit the most runs (NULL:
// all).
const historySQL = `SELECT h.job_name AS job, h.slot, h.holder, h.fencing_token, h.attempt, h.started_at, h.finished_at, h.exit_code, h.outcome,
  {scheduled_at} AS scheduled_at, coalesce({output_bytes}, 0) AS output_bytes, coalesce({stopped_by}, '') AS stopped_by
FROM {history} h WHERE (@job::text IS NULL OR h.job_name = @job::text) AND (@since::timestamptz IS NULL OR h.finished_at >= @since::timestamptz)
ORDER BY h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT @limit::integer`

// History reads finished runs from the history table. Without one it
// returns an error wrapping ErrNoHistory; without the lease table, one
// matching ErrNoTable.
func (r *Reader) History(ctx context.Context, q HistoryQuery) ([]Run, error) {
	hs, err := r.readableHistory(ctx)
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
	rows, err := r.db.Query(ctx, r.forTable(hs).history, pgx.StrictNamedArgs{"job": job, "since": since, "limit": limit})
	if err != nil {
		return nil, r.historyError(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Run])
	for i := range out {
		out[i].noHolder()
	}
	if err == nil {
		err = r.origins(ctx, out)
	}
	if err != nil {
		return nil, r.historyError(err)
	}
	return out, nil
}

// Freshness is what the history says about a job's recent runs: its newest
// successful run, its newest run of any kind and its newest run that
// counts (Run.Counts), with the database's clock.
type Freshness struct {
	Job string
	// Now is the database clock when it was read.
	Now time.Time
	// LastSuccess is the newest run that exited 0, or nil if none is kept.
	LastSuccess *Run
	// LastRun is the newest run, or nil if none is kept. A scheduled time
	// missed or skipped is not a run.
	LastRun *Run
	// LastCounted is the newest run that counts (not stopped), or nil.
	LastCounted *Run
}

// freshnessSQL reads @job's newest successful run, newest run and newest
// run that counts through the (job_name, finished_at) index: three probes,
// never a scan, however long the history (the last walks back past the
// stopped runs). It returns three rows, kind success, newest and counted,
// each with the database's clock.
const freshnessSQL = `SELECT now() AS now, 'success' AS kind, s.* FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT ` + runColumns + `, {stopped_by} AS stopped_by FROM {history} h WHERE job_name = @job::text AND ` + succeededSQL + `
  ORDER BY finished_at DESC LIMIT 1) s ON true
UNION ALL
SELECT now(), 'newest', r.* FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT ` + runColumns + `, {stopped_by} AS stopped_by FROM {history} h WHERE job_name = @job::text
  AND outcome NOT IN ` + lease.NotRunSQL + `
  ORDER BY finished_at DESC LIMIT 1) r ON true
UNION ALL
SELECT now(), 'counted', c.* FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT ` + runColumns + `, {stopped_by} AS stopped_by FROM {history} h WHERE job_name = @job::text
  AND ` + countsSQL + `
  ORDER BY finished_at DESC LIMIT 1) c ON true`

// freshnessRow reads a row of freshnessSQL.
type freshnessRow struct {
	Now       time.Time
	Kind      string
	StoppedBy *string
	nullableRun
}

// Freshness reads job's newest successful run and newest run from the
// history. Without a history table it returns an error wrapping
// ErrNoHistory.
func (r *Reader) Freshness(ctx context.Context, job string) (Freshness, error) {
	f := Freshness{Job: job}
	if err := lease.CheckJob(job); err != nil {
		return f, err
	}
	hs, err := r.readableHistory(ctx)
	if err != nil {
		return f, err
	}
	rows, _ := r.db.Query(ctx, r.forTable(hs).freshness, pgx.StrictNamedArgs{"job": job})
	found, err := pgx.CollectRows(rows, pgx.RowToStructByName[freshnessRow])
	if err != nil {
		return f, r.historyError(err)
	}
	for _, row := range found {
		f.Now = row.Now
		run := row.run(job)
		run.stoppedBy(row.StoppedBy)
		switch row.Kind {
		case "success":
			f.LastSuccess = run
		case "newest":
			f.LastRun = run
		case "counted":
			f.LastCounted = run
		}
	}
	return f, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// runColumns are the history's columns that nullableRun reads.
const runColumns = `slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome`

// nullableRun reads runColumns of a run that a LEFT JOIN may leave out.
type nullableRun struct {
	Slot, Attempt, ExitCode *int
	Holder, Outcome         *string
	FencingToken            *int64
	StartedAt, FinishedAt   *time.Time
}

func (n *nullableRun) run(job string) *Run {
	if n.FinishedAt == nil {
		return nil
	}
	r := &Run{Job: job, Slot: *n.Slot, Holder: *n.Holder, FencingToken: *n.FencingToken, Attempt: *n.Attempt,
		StartedAt: *n.StartedAt, FinishedAt: *n.FinishedAt, ExitCode: n.ExitCode, Outcome: *n.Outcome}
	r.noHolder()
	return r
}

// stoppedBy sets By of a stopped run to its history row's stopped_by.
func (r *Run) stoppedBy(by *string) {
	if r != nil && r.Outcome == lease.OutcomeStopped {
		r.By = deref(by)
	}
}

// noHolder moves the holder column of a scheduled time nobody ran to By:
// the history's holder of such a row is who accounted for the time (for a
// paused one, the operator who paused the job), and no holder held it.
func (r *Run) noHolder() {
	if lease.NotRun(r.Outcome) {
		r.By, r.Holder = r.Holder, ""
	}
}

// OutputQuery chooses the run whose kept output Reader.Output reads: Job's
// run under FencingToken (0: its newest run that kept output), and of
// that lease's runs the attempt Attempt (0: the last).
type OutputQuery struct {
	Job          string
	FencingToken int64
	Attempt      int
}

// outputSQL reads the kept output of one run: @job the job, @token the
// token (NULL: the newest run that kept output), @attempt the attempt
// (NULL: the last).
const outputSQL = `SELECT fencing_token, attempt, output FROM {history}
WHERE job_name = @job::text AND output IS NOT NULL
  AND (@token::bigint IS NULL OR fencing_token = @token::bigint) AND (@attempt::integer IS NULL OR attempt = @attempt::integer)
ORDER BY finished_at DESC, fencing_token DESC, attempt DESC LIMIT 1`

// Output reads the output a run kept (--keep-output), and the token and
// attempt of the run it read. A run that kept none, or a history table
// without kept output, gives an error wrapping ErrNoOutput.
func (r *Reader) Output(ctx context.Context, q OutputQuery) (out []byte, token int64, attempt int, err error) {
	if err := lease.CheckJob(q.Job); err != nil {
		return nil, 0, 0, err
	}
	hs, err := r.readableHistory(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	if r.forTable(hs).output == "" {
		return nil, 0, 0, fmt.Errorf("%w: history table %s keeps no output yet (leasewrap migrate adds it)", ErrNoOutput, r.objects.History)
	}
	var tok *int64
	if q.FencingToken != 0 {
		tok = &q.FencingToken
	}
	var att *int
	if q.Attempt != 0 {
		att = &q.Attempt
	}
	rows, _ := r.db.Query(ctx, r.sql.output, pgx.StrictNamedArgs{"job": q.Job, "token": tok, "attempt": att})
	kept, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[keptOutput])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, 0, fmt.Errorf("%w for job %q%s", ErrNoOutput, q.Job, describeRun(q))
	}
	if err != nil {
		return nil, 0, 0, r.historyError(err)
	}
	return kept.Output, kept.FencingToken, kept.Attempt, nil
}

// keptOutput reads outputSQL.
type keptOutput struct {
	FencingToken int64
	Attempt      int
	Output       []byte
}

// ErrNoOutput means the run asked for kept no output.
var ErrNoOutput = errors.New("no kept output")

func describeRun(q OutputQuery) string {
	switch {
	case q.FencingToken != 0 && q.Attempt != 0:
		return fmt.Sprintf(" (token %d, attempt %d)", q.FencingToken, q.Attempt)
	case q.FencingToken != 0:
		return fmt.Sprintf(" (token %d)", q.FencingToken)
	}
	return ""
}
