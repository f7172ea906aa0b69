package inspect

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// JobStatus is one job's lease row as an operator reads it. Times come from
// the database; ExpiresIn is measured on its clock.
type JobStatus struct {
	Job          string
	Holder       string
	State        lease.State // lease.StateHeld, StateReleasing, StateKept, StateReleased or StateExpired
	ExpiresIn    time.Duration
	FencingToken int64
	LastStarted  *time.Time
	LastFinished *time.Time
	LastExitCode *int
	LastHolder   *string
	// Slot is which of the job's Slots this row is (1 of 1 for a job with
	// one slot).
	Slot, Slots int
	// Schedule is the job's schedule in its canonical form, as
	// schedule.Parse reads it back, nil for a job without one.
	Schedule *string
	// Paused is the job's pause in force (on its first slot's row), nil
	// when it is not paused.
	Paused *lease.Pause
	// Queue is the job's live standbys (leasewrap --wait) in the order a
	// release hands the lease on; only the first slot's row of a job with
	// one slot has any.
	Queue []lease.Standby
}

// pauseColumns read a lease row's pause in force, named as pauseRow's
// fields: who (NULL: none), why, since and until (NULL: until resumed).
const pauseColumns = `CASE WHEN paused_until > now() THEN coalesce(paused_by, '') END AS paused_by,
  coalesce(pause_reason, '') AS pause_reason, paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until`

// pauseRow reads pauseColumns.
type pauseRow struct {
	PausedBy    *string
	PauseReason string
	PausedAt    *time.Time
	PausedUntil *time.Time
}

// pause is the pause read, nil when none is in force.
func (p *pauseRow) pause() *lease.Pause {
	if p.PausedBy == nil {
		return nil
	}
	out := &lease.Pause{By: *p.PausedBy, Reason: p.PauseReason}
	if p.PausedAt != nil {
		out.Since = *p.PausedAt
	}
	if p.PausedUntil != nil {
		out.Until = *p.PausedUntil
	}
	return out
}

// unread reports whether column is one of the lease table's that status
// does not read (released_by, for the holder alone; scheduled_since, which
// the summaries read as NULL where it is missing): a table of an earlier
// version without it, until a take or migrate adds it, is read as it is.
func unread(column string) bool { return column == "released_by" || column == "scheduled_since" }

// Live reports whether no other holder can take the lease now.
func (j JobStatus) Live() bool { return j.ExpiresIn > 0 }

// statusSQL reads the lease rows: @job the job (NULL: every job). Slot rows
// (slot > 1) are named job#slot and shown under their job.
var statusSQL = `SELECT ` + schema.BaseJob + ` AS job, holder, fencing_token,
  ` + schema.ExpiresInMicros + ` AS expires_in_micros,
  ` + schema.RowState + ` AS state,
  last_started_at, last_finished_at, last_exit_code, last_holder, coalesce(slot, 1) AS slot, coalesce(slots, 1) AS slots, schedule,
  ` + pauseColumns + `,
  ` + lease.QueueSQL("l") + ` AS queue
FROM {lease} l WHERE @job::text IS NULL OR job_name = @job::text OR (slot > 1 AND job_name = @job::text || '#' || slot)
ORDER BY job, coalesce(slot, 1)`

// statusRow reads statusSQL.
type statusRow struct {
	Job             string
	Holder          string
	FencingToken    int64
	ExpiresInMicros int64
	State           lease.State
	LastStartedAt   *time.Time
	LastFinishedAt  *time.Time
	LastExitCode    *int
	LastHolder      *string
	Slot, Slots     int
	Schedule        *string
	pauseRow
	// Queue is lease.QueueSQL's JSON, for lease.ParseQueue.
	Queue []byte
}

func (st *statusRow) status() (JobStatus, error) {
	queue, err := lease.ParseQueue(st.Queue)
	if err != nil {
		return JobStatus{}, fmt.Errorf("job %q: %w", st.Job, err)
	}
	return JobStatus{Job: st.Job, Holder: st.Holder, State: st.State, FencingToken: st.FencingToken,
		ExpiresIn: time.Duration(st.ExpiresInMicros) * time.Microsecond, LastStarted: st.LastStartedAt,
		LastFinished: st.LastFinishedAt, LastExitCode: st.LastExitCode, LastHolder: st.LastHolder,
		Slot: st.Slot, Slots: st.Slots, Schedule: st.Schedule, Paused: st.pause(), Queue: queue}, nil
}

// Status reads the lease rows, all of them or only job's when job is not
// empty. Without a lease table it returns an error matching ErrNoTable,
// and for a job without a row one matching lease.ErrNoJob. It reads the
// lease table only, never the history.
func (r *Reader) Status(ctx context.Context, job string) ([]JobStatus, error) {
	st, err := r.objects.Read(ctx, r.db)
	if err != nil {
		return nil, err
	}
	if !st.TableExists {
		return nil, r.noTable()
	}
	if missing := slices.DeleteFunc(slices.Clone(st.MissingColumns), unread); len(missing) > 0 {
		return nil, fmt.Errorf("lease table %s lacks %v: run leasewrap migrate", r.objects.Lease, missing)
	}
	var jobArg *string
	if job != "" {
		jobArg = &job
	}
	rows, err := r.db.Query(ctx, r.sql.status, pgx.StrictNamedArgs{"job": jobArg})
	if err != nil {
		return nil, fmt.Errorf("cannot read lease table %s: %w", r.objects.Lease, pgerr.Classify(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByName[statusRow])
	if err != nil {
		return nil, fmt.Errorf("cannot read lease table %s: %w", r.objects.Lease, pgerr.Classify(err))
	}
	out := make([]JobStatus, len(found))
	for i, st := range found {
		if out[i], err = st.status(); err != nil {
			return nil, fmt.Errorf("cannot read lease table %s: %w", r.objects.Lease, err)
		}
	}
	if job != "" && len(out) == 0 {
		return nil, fmt.Errorf("job %q: %w", job, lease.ErrNoJob)
	}
	return out, nil
}

// OutcomeRunning is the outcome of a run that Running makes from a live
// lease: one that has not finished. The history never records it.
const OutcomeRunning = "running"

// Running returns the runs that the live leases among jobs (held or
// releasing, with a start) stand for, as runs with OutcomeRunning that
// finish at now: what a timeline draws next to the finished runs.
func Running(jobs []JobStatus, now time.Time) []Run {
	var out []Run
	for _, j := range jobs {
		if (j.State == lease.StateHeld || j.State == lease.StateReleasing) && j.LastStarted != nil {
			out = append(out, Run{Job: j.Job, Slot: max(j.Slot, 1), Holder: j.Holder, FencingToken: j.FencingToken,
				Attempt: 1, StartedAt: *j.LastStarted, FinishedAt: now, Outcome: OutcomeRunning})
		}
	}
	return out
}
