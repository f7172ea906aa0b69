package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
)

// OutcomePaused is the outcome of a scheduled time that came due while the
// job was paused.
const OutcomePaused = "paused"

// NotRun reports whether a history outcome is that of a scheduled time
// nobody ran (missed, skipped or paused): not a run.
func NotRun(outcome string) bool {
	return outcome == OutcomeMissed || outcome == OutcomeSkipped || outcome == OutcomePaused
}

// NotRunSQL is NotRun's list in SQL, for outcome NOT IN NotRunSQL.
const NotRunSQL = `('` + OutcomeMissed + `', '` + OutcomeSkipped + `', '` + OutcomePaused + `')`

// Pause is a job's pause, as its lease row records it.
type Pause struct {
	// By is who paused it, and Reason why (may be empty).
	By, Reason string
	// Since is when, on the database clock; Until when it runs out (zero:
	// when resumed).
	Since, Until time.Time
}

// Why a pause is a few columns of the lease row, read by every take:
//
//   - Every take (plain, slots, scheduled, requested) is already one
//     statement on that row: its condition grows by one column, and no
//     instance can miss the pause, whatever its flags or version of this
//     protocol's takes.
//   - It does not stop a running command: a holder's renewals do not read
//     it. The next take after that run finds the job paused.
//   - A scheduled time that comes due while paused is claimed "paused" by
//     the take that finds it, in the same statement, once: the time stays
//     accounted for exactly once.
//   - Resuming notifies the job's channel, as a release does: standbys
//     take at once.

// pausedCondition is true of a lease row whose job is paused now.
const pausedCondition = `paused_until > now()`

// pauseColumns reads the pause of the lease row aliased row, with the
// database's now(), for pauseRow: a row that is missing (a LEFT JOIN)
// reads as not paused. A take's answer carries them, so that a take which
// found the job paused says so from its own snapshot: a second read could
// find the pause just ended, and the job neither paused nor held.
func pauseColumns(row string) string {
	return `coalesce(` + row + `.` + pausedCondition + `, false) AS paused,
  CASE WHEN ` + row + `.paused_until < 'infinity' THEN ` + row + `.paused_until END AS paused_until,
  ` + row + `.paused_at, ` + row + `.paused_by, ` + row + `.pause_reason, now() AS now`
}

// noPauseColumns stands for pauseColumns in the branch of an answer that
// took the lease.
const noPauseColumns = `false AS paused, NULL::timestamptz AS paused_until, NULL::timestamptz AS paused_at,
  NULL::text AS paused_by, NULL::text AS pause_reason, now() AS now`

// pauseRow reads pauseColumns.
type pauseRow struct {
	Paused                bool
	PausedUntil, PausedAt *time.Time
	PausedBy, PauseReason *string
	Now                   time.Time
}

// maxPauseLook bounds how long a standby of a paused job waits before it
// looks again: resuming wakes it, and a look costs one read.
const maxPauseLook = time.Minute

// markPaused makes e, read with p, say the job is paused when it is: state
// StatePaused, its Pause, no holder (whoever runs a command meanwhile,
// nobody takes the lease after it), and as time left the pause's, at most
// maxPauseLook.
func (p pauseRow) markPaused(e *HeldError) *HeldError {
	if !p.Paused {
		return e
	}
	e.Paused = &Pause{By: deref(p.PausedBy), Reason: deref(p.PauseReason)}
	if p.PausedAt != nil {
		e.Paused.Since = *p.PausedAt
	}
	e.Holder, e.State, e.ExpiresIn = "", StatePaused, maxPauseLook
	if p.PausedUntil != nil {
		e.Paused.Until, e.ExpiresIn = *p.PausedUntil, min(p.PausedUntil.Sub(p.Now), maxPauseLook)
	}
	return e
}

// pauseSQL pauses a job: @job, @holder who, @until (NULL: until resumed),
// @reason. A job without a row gets a free one. It answers the pause
// recorded and the row's holder when its lease is live (a command that
// goes on).
const pauseSQL = `WITH p AS (
  INSERT INTO {lease} AS l (job_name, holder, expires_at, fencing_token, released_at, paused_until, paused_at, paused_by, pause_reason)
  VALUES (@job::text, @holder::text, now(), ` + clockToken + `, now(), coalesce(@until::timestamptz, 'infinity'), now(), @holder::text, @reason::text)
  ON CONFLICT (job_name) DO UPDATE SET paused_until = excluded.paused_until, paused_at = excluded.paused_at,
    paused_by = excluded.paused_by, pause_reason = excluded.pause_reason
  RETURNING paused_at, paused_until, CASE WHEN expires_at > now() THEN holder END AS running)
SELECT paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until, running FROM p`

// resumeSQL ends a job's pause: @job, and @job_channel its channel
// (jobChannel). It answers the pause it ended (no row: none was in force),
// and wakes the job's standbys. The pause ends now, as one whose --until
// came: paused_until is when the queue's turns count from (queueLookSQL),
// so that the head of the queue takes the lease first, as after a release.
const resumeSQL = `WITH was AS (
  SELECT paused_at, paused_until, paused_by, pause_reason FROM {lease}
  WHERE job_name = @job::text AND ` + pausedCondition + ` FOR UPDATE),
resumed AS (
  UPDATE {lease} SET paused_until = now()
  WHERE job_name = @job::text AND ` + pausedCondition + `)
SELECT paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until,
  coalesce(paused_by, '') AS paused_by, coalesce(pause_reason, '') AS pause_reason, pg_notify(@job_channel::text, @job::text)::text AS notified
FROM was`

// Pause pauses job until until (zero: until Resume), as who, for reason:
// no instance takes its lease meanwhile, and its scheduled times are
// recorded paused. It creates or upgrades the tables as a take does. It
// returns the pause and, when a command runs under the lease now, its
// holder (the command goes on).
func (s *Store) Pause(ctx context.Context, job, reason string, until time.Time) (p Pause, running string, err error) {
	if err := CheckJob(job); err != nil {
		return Pause{}, "", err
	}
	if err := s.checkSchema(ctx, false); err != nil {
		return Pause{}, "", err
	}
	var untilArg *time.Time
	if !until.IsZero() {
		untilArg = &until
	}
	row, err := queryOne[pausedRow](ctx, s.db, s.sql.pause, pgx.StrictNamedArgs{"job": job, "holder": s.cfg.holder, "until": untilArg, "reason": reason})
	if err != nil {
		return Pause{}, "", fmt.Errorf("cannot pause %q: %w", job, pgerr.Classify(err))
	}
	return row.pause(s.cfg.holder, reason), deref(row.Running), nil
}

// pauseTimes are a pause's start and end (nil: until resumed), as pauseSQL
// and resumeSQL answer them.
type pauseTimes struct {
	PausedAt    time.Time
	PausedUntil *time.Time
}

// pause is the pause, by who for reason.
func (r *pauseTimes) pause(by, reason string) Pause {
	p := Pause{Since: r.PausedAt, By: by, Reason: reason}
	if r.PausedUntil != nil {
		p.Until = *r.PausedUntil
	}
	return p
}

// pausedRow reads pauseSQL: the pause, and the holder of a live lease (a
// command that goes on).
type pausedRow struct {
	pauseTimes
	Running *string
}

// resumedRow reads resumeSQL: the pause ended, and the value of the
// notification sent.
type resumedRow struct {
	pauseTimes
	PausedBy, PauseReason string
	Notified              string
}

// Resume ends job's pause, and wakes its standbys. It returns the pause
// it ended, or nil when none was in force.
func (s *Store) Resume(ctx context.Context, job string) (*Pause, error) {
	if err := CheckJob(job); err != nil {
		return nil, err
	}
	row, err := queryOne[resumedRow](ctx, s.db, s.sql.resume, pgx.StrictNamedArgs{"job": job, "job_channel": jobChannel(s.channel, job)})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("cannot resume %q: %w", job, pgerr.Classify(err))
	}
	p := row.pause(row.PausedBy, row.PauseReason)
	return &p, nil
}
