package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/lease"
)

// Account is how one scheduled time of a job is accounted for.
type Account struct {
	// At is the scheduled time; Now the database clock when it was read.
	At, Now time.Time
	// Claim is the outcome of the time's claim: lease.ClaimRun,
	// lease.OutcomeMissed, lease.OutcomeSkipped (or lease.ClaimManual);
	// "" when no instance has accounted for the time (yet).
	Claim string
	// Run is the time's history row (the newest, for a run of several
	// attempts), nil while a run goes on or when none was recorded.
	Run *Run
}

// accountSQL reads the claim and the history row of one scheduled time:
// @job the job, @scheduled_at the time. Both through an index: the claims' primary key, and
// the history's (job_name, finished_at) index from the time on.
const accountSQL = `SELECT now(),
  (SELECT outcome FROM {claims} WHERE job_name = @job::text AND scheduled_at = @scheduled_at::timestamptz),
  r.slot, r.holder, r.fencing_token, r.attempt, r.started_at, r.finished_at, r.exit_code, r.outcome
FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT * FROM {history} WHERE job_name = @job::text AND finished_at >= @scheduled_at::timestamptz
  AND scheduled_at = @scheduled_at::timestamptz ORDER BY finished_at DESC LIMIT 1) r ON true`

// Scheduled reads how job's scheduled time at is accounted for. It only
// reads; without the claims or history table it returns an error.
func (r *Reader) Scheduled(ctx context.Context, job string, at time.Time) (Account, error) {
	a := Account{At: at}
	if err := lease.CheckJob(job); err != nil {
		return a, err
	}
	if _, err := r.readableHistory(ctx); err != nil {
		return a, err
	}
	var (
		claim *string
		run   nullableRun
	)
	err := r.db.QueryRow(ctx, r.objects.Render(accountSQL), pgx.StrictNamedArgs{"job": job, "scheduled_at": at}).Scan(append([]any{&a.Now, &claim}, run.dest()...)...)
	if pgerr.SQLState(err) == pgerr.CodeUndefinedTable {
		return a, fmt.Errorf("no claims table %s: no job with a schedule has run on %s", r.objects.Claims, r.objects.Lease)
	}
	if err != nil {
		return a, fmt.Errorf("cannot read the claims %s and history %s: %w", r.objects.Claims, r.objects.History, pgerr.Classify(err))
	}
	if claim != nil {
		a.Claim = *claim
	}
	a.Run = run.run(job)
	return a, nil
}
