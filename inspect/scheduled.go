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
	// By is the holder the claim records: who ran the time, whose run
	// still held the lease (skipped), who paused the job (paused), or the
	// instance that recorded the time missed.
	By string
	// Run is the time's history row (the newest, for a run of several
	// attempts), nil while a run goes on or when none was recorded.
	Run *Run
}

// accountSQL reads the claim and the history row of one scheduled time:
// @job the job, @scheduled_at the time. Both through an index: the claims' primary key, and
// the history's (job_name, finished_at) index from the time on.
const accountSQL = `SELECT now() AS now, c.outcome AS claim, c.holder AS claim_by, r.*
FROM (VALUES (1)) AS one
LEFT JOIN {claims} c ON c.job_name = @job::text AND c.scheduled_at = @scheduled_at::timestamptz
LEFT JOIN LATERAL (SELECT ` + runColumns + ` FROM {history} WHERE job_name = @job::text AND finished_at >= @scheduled_at::timestamptz
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
	rows, _ := r.db.Query(ctx, r.sql.account, pgx.StrictNamedArgs{"job": job, "scheduled_at": at})
	row, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[accountRow])
	if pgerr.SQLState(err) == pgerr.CodeUndefinedTable {
		return a, fmt.Errorf("no claims table %s: no job with a schedule has run on %s", r.objects.Claims, r.objects.Lease)
	}
	if err != nil {
		return a, fmt.Errorf("cannot read the claims %s and history %s: %w", r.objects.Claims, r.objects.History, pgerr.Classify(err))
	}
	a.Now, a.Claim, a.By, a.Run = row.Now, deref(row.Claim), deref(row.ClaimBy), row.run(job)
	return a, nil
}

// accountRow reads accountSQL.
type accountRow struct {
	Now            time.Time
	Claim, ClaimBy *string
	nullableRun
}
