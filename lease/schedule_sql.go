package lease

import (
	"github.com/redbite/leasewrap/schema"
)

// The statements of scheduled runs. A scheduled time is accounted for by
// exactly one row of the claims table ({claims}), keyed by (job, scheduled
// time): run, skipped (the lease was held at that time), missed (nobody
// ran it) or manual. Every statement that writes such a row writes it
// with what goes with it (the lease take, the history row) in one
// statement, so one commit does all or nothing.
//
// Why the take of a scheduled run is safe in one round trip:
//
//   - The take is conditional, as the plain take is (free or expired row,
//     token it read), and also on the time having no claim in the
//     statement's snapshot and being due on the database clock. That is
//     the common way a loser learns the time was run: no write at all.
//   - The claim is a plain INSERT (no ON CONFLICT) from the take's RETURNING.
//     When a claim committed after the snapshot was taken (a missed or
//     skipped row another instance wrote meanwhile, or a run whose holder
//     already released), the INSERT fails with a unique violation and the
//     whole statement, the take included, rolls back: the time was
//     accounted for elsewhere, and nothing of this attempt remains. An
//     INSERT that meets an uncommitted claim waits for it, so the primary
//     key decides between two takes whatever their clocks.
//   - Two takes of the same free row serialise on the row lock; the second
//     sees the first's live lease and takes nothing.
//   - The take is also conditional on the run it replaces being as the
//     snapshot saw it (same token, same last_finished_at): a release that
//     committed between the snapshot and the row lock (its expiry is its
//     own now(), which may be older than the take's) makes the take find
//     nothing, rather than close as lost a run its holder just recorded.
//     The caller asks again.
//
// A lease held at a time that is due (by a run still going, this job's
// runs never overlap) gets the time a skipped claim in the same statement,
// ON CONFLICT DO NOTHING: among the instances that find it held, one
// writes it.
//
// A claim accounts for its own time only, and claims are pruned, and an
// operator may empty the table; the lease row's accounted_through (the
// mark) stands for every time up to it. Each instance accounts for the
// times in order, so a time it claims has every time before it
// accounted for: every statement that claims times moves the mark on to
// the latest of them, holding the lease row's lock while it decides, and
// claims no time at or before the mark. The mark a statement compares
// with is the row's, and the latest claim when that is later (claims an
// earlier version wrote without moving it). So instances that differ in
// catch-up window or policy, or in how long they keep claims, cannot run
// or record a time again: the first to account for a time decides it.
// A summary of missed times (first_at to scheduled_at) that reaches back
// to the mark is refused whole: the caller plans again from the mark.

// scheduledStatements are a Store's statements of scheduled runs.
type scheduledStatements struct {
	register, take, takeRecording, missed, missedRecording string
	pruneClaims, freeRow                                   string
}

func newScheduledStatements(o schema.Objects) scheduledStatements {
	return scheduledStatements{
		register:        o.Render(registerSQL),
		take:            o.Render(takeScheduledSQL),
		takeRecording:   o.Render(takeScheduledRecordingSQL),
		missed:          o.Render(missedSQL),
		missedRecording: o.Render(missedRecordingSQL),
		pruneClaims:     o.Render(pruneClaimsSQL),
		freeRow:         o.Render(freeRowSQL),
	}
}

// latestClaim is the latest scheduled time claimed: @job. A requested
// or manual run (leasewrap trigger) is at the time it was asked for, not
// a scheduled time, and accounts for none.
const latestClaim = `(SELECT max(scheduled_at) FROM {claims} WHERE job_name = @job::text
  AND outcome NOT IN ('` + ClaimRequested + `', '` + ClaimManual + `'))`

// registerSQL records a job's schedule if none is recorded: @job, @spec
// the canonical spec, @holder, @zone the fingerprint of the zone data its
// times are computed with (NULL: none matters). A job without a row gets
// one, free (released at once, as a lease handed back), so that an
// instance with another schedule is refused when it starts, not at its
// first time. The fingerprint is recorded with the schedule, and with a
// schedule recorded before fingerprints were; when the schedule is
// recorded (scheduledSince). It answers the schedule and the fingerprint
// recorded, the database clock and the mark.
const registerSQL = `WITH reg AS (
  INSERT INTO {lease} AS l (job_name, holder, expires_at, fencing_token, released_at, schedule, schedule_zone, scheduled_since)
  VALUES (@job::text, @holder::text, now(), ` + clockToken + `, now(), @spec::text, @zone::text, now())
  ON CONFLICT (job_name) DO UPDATE SET schedule = excluded.schedule,
    schedule_zone = CASE WHEN l.schedule IS NULL THEN excluded.schedule_zone ELSE coalesce(l.schedule_zone, excluded.schedule_zone) END,
    scheduled_since = ` + scheduledSince + `
  WHERE l.schedule IS NULL OR l.schedule = excluded.schedule AND l.schedule_zone IS NULL AND excluded.schedule_zone IS NOT NULL
  RETURNING schedule, schedule_zone),
cur AS (
  SELECT schedule, schedule_zone, accounted_through FROM {lease} WHERE job_name = @job::text)
SELECT coalesce((SELECT schedule FROM reg), (SELECT schedule FROM cur)) AS schedule,
  CASE WHEN EXISTS (SELECT FROM reg) THEN (SELECT schedule_zone FROM reg) ELSE (SELECT schedule_zone FROM cur) END AS zone,
  now() AS now, greatest((SELECT accounted_through FROM cur), ` + latestClaim + `) AS latest`

// scheduledSince is the scheduled_since a statement that records the
// schedule @spec on the lease row l sets: now() when the row had none,
// or another one (leasewrap reschedule), and what it was otherwise. It
// is when the job began to owe the schedule's times; a row scheduled
// before the column was added keeps NULL, not a guess.
const scheduledSince = `CASE WHEN l.schedule IS DISTINCT FROM @spec::text THEN now() ELSE l.scheduled_since END`

// scheduleMarkSQL reads a job's schedule, the database clock and the
// mark: @job. No row: the job has no lease row.
const scheduleMarkSQL = `SELECT schedule, now() AS now, greatest(accounted_through, ` + latestClaim + `) AS latest
FROM {lease} WHERE job_name = @job::text`

// takeScheduledSQL takes the lease of a single-slot job for one scheduled
// time and claims the time (see above): @job, @holder, @ttl (microseconds), @at
// the scheduled time, @spec the canonical spec, @skip_held whether a held lease
// makes the time skipped. It answers: taken, token, the row as the
// snapshot saw it (holder, microseconds left, state, slots, schedule),
// the time's claim (outcome and holder: the one found, the skipped one
// written, or "claimed" for a time at or before the mark), the database
// clock and the mark.
var takeScheduledSQL = takeScheduledCTEs + takeScheduledAnswer

// takeScheduledRecordingSQL is takeScheduledSQL that also closes the run
// of a holder that never released as lost (with its scheduled time, when
// its claim proves it), and records a skipped time in the history.
var takeScheduledRecordingSQL = takeScheduledCTEs + lostScheduledRun + `,
skippedRun AS (
  INSERT INTO {history} (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome, scheduled_at)
  SELECT @job::text, 1, holder, 0, 1, @at::timestamptz, @at::timestamptz, outcome, @at::timestamptz
  FROM skipped)` + takeScheduledAnswer

// lostScheduledRun closes as lost, after a take (CTEs old and taken; @job
// job), the run of a holder that never released, with its scheduled time
// (last_scheduled_at: a plain take clears it) unless a claim of that time
// carries another token (a plain take of an earlier version, which kept
// it). An operator who emptied the claims took the claim's proof away,
// not the time's account.
var lostScheduledRun = lostRun("old", "1", "", `CASE WHEN NOT EXISTS (SELECT FROM {claims} c WHERE c.job_name = @job::text
      AND c.scheduled_at = o.last_scheduled_at AND c.fencing_token <> o.fencing_token) THEN o.last_scheduled_at END`)

var takeScheduledCTEs = `WITH old AS (
  SELECT fencing_token, holder, expires_at, acquired_at, renewed_at, last_started_at, last_finished_at, last_scheduled_at, schedule, slots,
    accounted_through
  FROM {lease} WHERE job_name = @job::text),
mark AS (
  SELECT greatest((SELECT accounted_through FROM old), ` + latestClaim + `) AS at),
claimed AS (
  SELECT outcome, holder FROM {claims} WHERE job_name = @job::text AND scheduled_at = @at::timestamptz
  UNION ALL
  SELECT '` + ClaimedElsewhere + `', NULL FROM mark WHERE @at::timestamptz <= mark.at
  LIMIT 1),
due AS (
  SELECT WHERE @at::timestamptz <= now() AND NOT EXISTS (SELECT FROM claimed)
    AND coalesce((SELECT schedule FROM old), @spec::text) = @spec::text AND coalesce((SELECT slots FROM old), 1) = 1),
` + takeSpec{row: "@job::text", from: "due", read: "old",
	columns: []takeColumn{{name: "schedule", value: "@spec::text"}, {name: "last_scheduled_at", value: "@at::timestamptz"},
		{name: "accounted_through", value: "@at::timestamptz"}, {name: "scheduled_since", value: "now()", update: scheduledSince}},
	where: "coalesce(l.slots, 1) = 1 AND coalesce(l.schedule, @spec::text) = @spec::text\n" +
		"  AND @at::timestamptz > coalesce(l.accounted_through, '-infinity') AND NOT coalesce(l." + pausedCondition + ", false)"}.taken() + `,
claim AS (
  INSERT INTO {claims} (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, @at::timestamptz, '` + ClaimRun + `', @holder::text, fencing_token, now() FROM taken
  RETURNING 1),
held AS (
  SELECT holder, fencing_token, expires_at, accounted_through, coalesce(` + pausedCondition + `, false) AS paused, paused_by
  FROM {lease}
  WHERE job_name = @job::text AND EXISTS (SELECT FROM due) AND NOT EXISTS (SELECT FROM taken)
  FOR UPDATE),
skipped AS (
  INSERT INTO {claims} (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, @at::timestamptz, CASE WHEN h.paused THEN '` + OutcomePaused + `' ELSE '` + OutcomeSkipped + `' END,
    CASE WHEN h.paused THEN coalesce(h.paused_by, '') ELSE h.holder END, h.fencing_token, now()
  FROM held h WHERE (h.paused OR @skip_held::boolean AND h.expires_at > now()) AND @at::timestamptz > coalesce(h.accounted_through, '-infinity')
  ON CONFLICT DO NOTHING
  RETURNING outcome, holder),
skippedMark AS (
  UPDATE {lease} SET accounted_through = @at::timestamptz
  WHERE job_name = @job::text AND EXISTS (SELECT FROM skipped))`

const takeScheduledAnswer = `
SELECT EXISTS (SELECT FROM taken) AND EXISTS (SELECT FROM claim) AS taken,
  coalesce((SELECT fencing_token FROM taken), l.fencing_token, 0) AS token,
  l.holder, ` + schema.ExpiresInMicros + ` AS expires_in_micros, ` + schema.HeldState + ` AS state, coalesce(l.slots, 1) AS slots, l.schedule,
  coalesce((SELECT outcome FROM claimed), (SELECT outcome FROM skipped)) AS claim,
  coalesce((SELECT holder FROM claimed), (SELECT holder FROM skipped)) AS claimed_by,
  now() AS now, (SELECT at FROM mark) AS latest
FROM (VALUES (1)) AS one LEFT JOIN {lease} AS l ON l.job_name = @job::text`

// missedSQL records scheduled times nobody ran: @job, @holder the recording
// holder, @ats the times, @firsts for each the first time it stands for (NULL:
// itself alone; set for a long outage summarised in one row), @outcome the
// outcome (missed, or skipped for the times that came due while this
// holder's run held the lease).
// A time already claimed, at or before the mark, or not yet due on the
// database clock, is left alone; so is every time when a summary reaches
// back to the mark (the caller plans again from it), and when the job has
// no lease row (it answers so, and the caller makes one). It moves the mark on to the
// latest time it accounted for, under the lease row's lock. It answers
// how many it recorded, the database clock, the mark and whether the job
// has a lease row.
const missedSQL = missedCTE + missedAnswer

// missedRecordingSQL is missedSQL that also writes each time's history
// row (started_at its first time, finished_at and scheduled_at
// the time).
const missedRecordingSQL = missedCTE + `,
run AS (
  INSERT INTO {history} (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome, scheduled_at)
  SELECT @job::text, 1, holder, 0, 1, coalesce(first_at, scheduled_at), scheduled_at, outcome, scheduled_at
  FROM m)` + missedAnswer

const missedCTE = `WITH locked AS (
  SELECT greatest(accounted_through, ` + latestClaim + `) AS mark, CASE WHEN ` + pausedCondition + ` THEN paused_at END AS paused_at,
    coalesce(paused_by, '') AS paused_by
  FROM {lease} WHERE job_name = @job::text FOR UPDATE),
times AS (
  SELECT t.at, t.first FROM unnest(@ats::timestamptz[], @firsts::timestamptz[]) AS t(at, first)),
todo AS (
  SELECT t.at, t.first, p.outcome, CASE WHEN p.outcome = '` + OutcomePaused + `' THEN r.paused_by ELSE @holder::text END AS holder
  FROM times t, locked r,
    LATERAL (SELECT CASE WHEN @outcome::text = '` + OutcomeMissed + `' AND t.at >= r.paused_at THEN '` + OutcomePaused + `' ELSE @outcome::text END AS outcome) p
  WHERE t.at <= now() AND t.at > coalesce(r.mark, '-infinity')
    AND NOT EXISTS (SELECT FROM times s WHERE s.first <= coalesce(r.mark, '-infinity') AND s.at > coalesce(r.mark, '-infinity'))),
m AS (
  INSERT INTO {claims} (job_name, scheduled_at, first_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, at, first, outcome, holder, 0, now() FROM todo
  ORDER BY at
  ON CONFLICT DO NOTHING
  RETURNING scheduled_at, first_at, outcome, holder),
moved AS (
  UPDATE {lease} SET accounted_through = greatest(accounted_through, (SELECT max(at) FROM todo))
  WHERE job_name = @job::text AND EXISTS (SELECT FROM todo))`

const missedAnswer = `
SELECT (SELECT count(*) FROM m) AS recorded, now() AS now, greatest((SELECT max(at) FROM todo), (SELECT mark FROM locked)) AS latest,
  EXISTS (SELECT FROM locked) AS has_row`

// freeRowSQL gives a job whose lease row an operator deleted a free one
// again, as registerSQL does, without a schedule (its next take records
// it): @job, @holder.
const freeRowSQL = `INSERT INTO {lease} (job_name, holder, expires_at, fencing_token, released_at)
VALUES (@job::text, @holder::text, now(), ` + clockToken + `, now())
ON CONFLICT (job_name) DO NOTHING`

// pruneClaimsSQL deletes at most 1000 of a job's claims older than @keep
// microseconds: @job. It goes through the primary key, oldest first. It
// keeps the latest claim, which stands for the mark where the lease row
// is gone.
const pruneClaimsSQL = `DELETE FROM {claims} WHERE ctid = ANY (ARRAY(SELECT ctid FROM {claims}
  WHERE job_name = @job::text AND scheduled_at < now() - @keep::bigint * interval '1 microsecond'
    AND scheduled_at < ` + latestClaim + `
  ORDER BY job_name, scheduled_at LIMIT 1000))`
