package inspect

import (
	"context"
	"time"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/internal/pgerr"
	"github.com/redbite/leasewrap/schedule"
)

// How a run came to be: its Origin.
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

// Origins lists the origins a run may have. A run whose scheduled time's
// claim is gone (pruned, or its table dropped) has none: "".
var Origins = []string{OriginSchedule, OriginCatchUp, OriginManual, OriginPlain}

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
	case lease.OutcomeMissed, lease.OutcomeSkipped:
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

// readableClaims reports whether the claims table is there and this role
// may read it: without it, no run's origin beyond plain can be told.
func (r *Reader) readableClaims(ctx context.Context) (bool, error) {
	var ok bool
	err := r.db.QueryRow(ctx, `SELECT coalesce(pg_catalog.has_table_privilege(pg_catalog.to_regclass($1), 'SELECT'), false)`,
		r.objects.Claims).Scan(&ok)
	if err != nil {
		return false, pgerr.Classify(err)
	}
	return ok, nil
}
