package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
)

// How a run came to be: its Origin. A run whose scheduled time's claim is
// gone (pruned, or its table dropped) has none: "".
const (
	// OriginSchedule: a scheduler ran a scheduled time on time (within its
	// grace); a missed or skipped time has it too.
	OriginSchedule = "schedule"
	// OriginCatchUp: a scheduler ran a scheduled time late, past its grace
	// (--catch-up, after the schedulers were down or busy).
	OriginCatchUp = "catch-up"
	// OriginManual: leasewrap trigger asked for it.
	OriginManual = "manual"
	// OriginPlain: a run without a schedule (cron, an entrypoint, a run of
	// leasewrap by hand).
	OriginPlain = "plain"
)

// originOf decides how a run came to be from its scheduled time (nil: a
// run without a schedule), the outcome of that time's claim and when it
// was claimed (nil: no claim read), and the job's schedule: a run claimed
// later than its grace after its time was a catch-up.
func originOf(scheduledAt *time.Time, claim *string, claimedAt *time.Time, spec string) string {
	if scheduledAt == nil {
		return OriginPlain
	}
	if claim == nil {
		return ""
	}
	switch *claim {
	case lease.ClaimManual:
		return OriginManual
	case lease.OutcomeMissed, lease.OutcomeSkipped, lease.OutcomePaused:
		return OriginSchedule
	case lease.ClaimRun:
		g := schedule.DefaultGrace
		if s, err := schedule.Parse(spec, ""); err == nil && spec != "" {
			g = grace(s, *scheduledAt)
		}
		if claimedAt != nil && claimedAt.Sub(*scheduledAt) >= g {
			return OriginCatchUp
		}
		return OriginSchedule
	}
	return ""
}

// originsSQL reads the claims of scheduled times, and their jobs'
// schedules: @jobs the jobs, @times the times, each through a primary key.
const originsSQL = `SELECT d.n, c.outcome AS claim, c.claimed_at, l.schedule
FROM unnest(@jobs::text[], @times::timestamptz[]) WITH ORDINALITY AS d(job, at, n)
LEFT JOIN {claims} c ON c.job_name = d.job AND c.scheduled_at = d.at
LEFT JOIN {lease} l ON l.job_name = d.job`

// originRow reads originsSQL: the claim of the nth time asked for.
type originRow struct {
	N         int64
	Claim     *string
	ClaimedAt *time.Time
	Schedule  *string
}

// origins sets how each of runs came to be. Only runs with a scheduled
// time need the claims table, in one more statement: a job with a
// schedule created it. Without it (dropped, or not readable by this role)
// their origin stays unknown.
func (r *Reader) origins(ctx context.Context, runs []Run) error {
	var (
		jobs  []string
		times []time.Time
		index []int
	)
	for i := range runs {
		if runs[i].ScheduledAt == nil {
			runs[i].Origin = OriginPlain
			continue
		}
		jobs, times, index = append(jobs, runs[i].Job), append(times, *runs[i].ScheduledAt), append(index, i)
	}
	if len(jobs) == 0 {
		return nil
	}
	rows, err := r.db.Query(ctx, r.sql.origins, pgx.StrictNamedArgs{"jobs": jobs, "times": times})
	if err != nil {
		return r.claimsError(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByName[originRow])
	for _, o := range found {
		if o.N >= 1 && int(o.N) <= len(index) {
			run := &runs[index[o.N-1]]
			run.Origin = originOf(run.ScheduledAt, o.Claim, o.ClaimedAt, deref(o.Schedule))
		}
	}
	return r.claimsError(err)
}

// claimsError is nil for a claims table that is not there or not
// readable (what it would tell stays unknown), and says so otherwise.
func (r *Reader) claimsError(err error) error {
	switch pgerr.SQLState(err) {
	case "":
		if err == nil {
			return nil
		}
	case pgerr.CodeUndefinedTable, pgerr.CodeNoPrivilege:
		return nil
	}
	return fmt.Errorf("cannot read claims table %s: %w", r.objects.Claims, pgerr.Classify(err))
}
