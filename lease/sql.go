package lease

import "github.com/redbite/leasewrap/schema"

// Every statement of the protocol is one constant (or, for the takes, one
// variable built once) below and in schedule_sql.go, trigger.go and
// pause.go, its text in one place with its parameters named in the comment
// above it. A statement names its tables {lease}, {history} and {claims};
// newStatements renders them all, and only it, once per Store with the
// names schema.For quoted (see schema.Render).
// Every value is a bind parameter. A lease is live while expires_at >
// now(); all times come from the database clock, and durations are passed
// in microseconds.
//
// A statement that also writes the history (its name ends in Recording)
// is the plain one with CTEs added, so that a run is recorded in the same
// statement as the take or release that ends it, or not at all.

// statements are a Store's statements, rendered for its tables.
type statements struct {
	take, takeRecording, takeSlots, takeSlotsRecording string
	holder, renew, startAttempt                        string
	release, releaseRecording, releasePruning          string
	releaseAny, releaseAnyUnsaid                       string
	recordAttempt, recordLost                          string
	pause, resume                                      string
	enterQueue, leaveQueue, adopt, pin                 string
	queueLook, queueLookSlots                          string
	scheduleMark, reschedule                           string
	scheduleOf, withdraw, requestFate                  string
	// sched are the statements of scheduled runs, req those of manual
	// runs.
	sched scheduledStatements
	req   requestStatements
	// lookCall, renewCall and enterCall call the lease table's functions
	// (see functions_sql.go).
	lookCall, renewCall, enterCall string
}

func newStatements(o schema.Objects) statements {
	return statements{
		take:               o.Render(takeSQL),
		takeRecording:      o.Render(takeRecordingSQL),
		takeSlots:          o.Render(takeSlotsSQL),
		takeSlotsRecording: o.Render(takeSlotsRecordingSQL),
		holder:             o.Render(holderSQL),
		renew:              o.Render(renewSQL),
		startAttempt:       o.Render(startAttemptSQL),
		release:            o.Render(releaseSQL),
		releaseRecording:   o.Render(releaseRecordingSQL),
		releasePruning:     o.Render(releasePruningSQL),
		releaseAny:         o.Render(releaseAnySQL),
		releaseAnyUnsaid:   o.Render(releaseAnyUnsaidSQL),
		recordAttempt:      o.Render(recordAttemptSQL),
		recordLost:         o.Render(recordLostSQL),
		pause:              o.Render(pauseSQL),
		enterQueue:         o.Render(enterQueueSQL),
		leaveQueue:         o.Render(leaveQueueSQL),
		adopt:              o.Render(adoptSQL),
		queueLook:          o.Render(queueLookSQL(false)),
		queueLookSlots:     o.Render(queueLookSQL(true)),
		pin:                o.Render(pinSQL),
		resume:             o.Render(resumeSQL),
		scheduleMark:       o.Render(scheduleMarkSQL),
		reschedule:         o.Render(rescheduleSQL),
		scheduleOf:         o.Render(scheduleOfSQL),
		withdraw:           o.Render(withdrawSQL),
		requestFate:        o.Render(requestFateSQL),
		lookCall:           lookFunction.call(o),
		renewCall:          renewFunction.call(o),
		enterCall:          enterFunction.call(o),
		sched:              newScheduledStatements(o),
		req:                newRequestStatements(o),
	}
}

// takeSet is what a take writes over the row it takes: the new holder, a
// TTL from now, a token that rises and never repeats, and a run not yet
// finished. Setting job_name (to itself) makes the take lock the row like a
// key update (see leasewrap_check).
const takeSet = `job_name = excluded.job_name,
  holder = excluded.holder,
  expires_at = excluded.expires_at,
  fencing_token = greatest(l.fencing_token + 1, ` + clockToken + `),
  acquired_at = now(),
  renewed_at = now(),
  last_started_at = now(),
  last_finished_at = NULL,
  last_exit_code = NULL,
  last_holder = excluded.holder,
  released_at = NULL,
  released_by = NULL`

// clockToken is the database clock in microseconds since 1970, the floor of
// every new fencing token.
const clockToken = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// takeSQL is the take of a single-slot job: @job, @holder, @ttl (microseconds). It
// answers one row: taken, token, and when not taken the holder, its
// microseconds left, its state (schema.HeldState), the row's slots and its
// pause (pauseColumns).
//
// Takes a free or expired row; a live one (even our own id's) is left
// alone, so RETURNING gives no row. The token rises on every take and
// never repeats: it is at least the database clock in microseconds, so a
// row that was deleted, truncated or lost in a failover cannot hand out a
// token again that a holder before it had. Setting job_name (to itself)
// makes the take lock the row like a key update, so it waits for any
// transaction in which leasewrap_check holds the row FOR KEY SHARE;
// renewals do not, and do not wait. A row of a job run with --slots N > 1
// (slots is set) is not taken: the caller refuses the mismatch. The take
// is conditional on the token and the last finish it read, so that a run
// takeRecordingSQL closes is the one it replaced: a release that commits
// between the statement's snapshot and its row lock expires the row at
// its own now(), which may be before the take's, and without the second
// condition the take would close as lost a run its holder had just
// recorded.
//
// One round trip either way: when the take does not happen, the same
// statement reads the holder it found, from the statement's snapshot (a
// CTE's SELECT does not see the INSERT's row).
var takeSQL = takeCTEs + takeAnswer

// takeRecordingSQL is takeSQL that also closes the run of a holder that
// never released (it crashed, or was cut off) as lost, from the row as the
// statement found it. The run's attempt is one more than the attempts of
// its lease (job, token) already recorded (--retries).
var takeRecordingSQL = takeCTEs + lostRun("old", "1", "", "") + takeAnswer

var takeCTEs = `WITH old AS (
  SELECT fencing_token, holder, expires_at, acquired_at, renewed_at, last_started_at, last_finished_at FROM {lease} WHERE job_name = @job::text),
` + takeSpec{row: "@job::text", read: "old",
	columns: []takeColumn{{name: "last_scheduled_at", update: "NULL"}},
	where:   "coalesce(l.slots, 1) = 1 AND NOT coalesce(l." + pausedCondition + ", false)"}.taken()

var takeAnswer = `
SELECT true AS taken, fencing_token AS token, NULL::text AS holder, NULL::bigint AS expires_in_micros, NULL::text AS state, 1 AS slots,
  ` + noPauseColumns + `
FROM taken
UNION ALL
SELECT false, fencing_token, holder, ` + schema.ExpiresInMicros + `, ` + schema.HeldState + `, coalesce(slots, 1),
  ` + pauseColumns("l") + `
FROM {lease} AS l WHERE job_name = @job::text AND NOT EXISTS (SELECT FROM taken)`

// takeSlotsSQL takes the lowest free slot of a job with @slots: @job,
// @holder, @ttl (microseconds). It takes nothing when the job's first row records
// another number of slots (unless that is one, and the row is free: no
// other row can be live then), or when a row it would use is another
// job's (a job named "x#2"), and then reports which. Instances of the job
// all try its lowest free slot first, so two with different numbers
// meet on the same row, where only one can win. Like the single-slot take,
// it is conditional on the token it read. When no slot is free it reports
// the live slot that expires first. It answers: taken, token, slot,
// holder, microseconds left, state, the slots recorded, the foreign row,
// whether a slot looked free, and the job's pause (pauseColumns).
var takeSlotsSQL = takeSlotsCTEs + takeSlotsAnswer

// takeSlotsRecordingSQL is takeSlotsSQL that also closes the run of a
// holder that never released as lost (see takeRecordingSQL).
var takeSlotsRecordingSQL = takeSlotsCTEs + lostRun("pick", "o.slot", " AND o.present", "") + takeSlotsAnswer

var takeSlotsCTEs = `WITH want AS (
  SELECT g AS slot, ` + slotRowName + ` AS name FROM generate_series(1, @slots::integer) AS g),
cur AS (
  SELECT w.slot, w.name, l.job_name IS NOT NULL AS present,
    l.job_name IS NOT NULL AND coalesce(l.slot, 1) <> w.slot AS foreign_row,
    l.fencing_token, l.holder, l.expires_at, l.acquired_at, l.renewed_at, l.released_at, l.last_started_at, l.last_finished_at,
    CASE WHEN w.slot = 1 AND l.job_name IS NOT NULL THEN coalesce(l.slots, 1) END AS recorded
  FROM want w LEFT JOIN {lease} AS l ON l.job_name = w.name),
verdict AS (
  SELECT (SELECT recorded FROM cur WHERE slot = 1) AS recorded,
    (SELECT NOT present OR expires_at <= now() FROM cur WHERE slot = 1) AS first_free,
    (SELECT min(name) FROM cur WHERE foreign_row) AS foreign_name),
pause AS (
  SELECT ` + pauseColumns("p") + `
  FROM (VALUES (1)) AS one LEFT JOIN {lease} AS p ON p.job_name = @job::text),
pick AS (
  SELECT c.* FROM cur c, verdict v, pause z
  WHERE (NOT c.present OR c.expires_at <= now()) AND v.foreign_name IS NULL
    AND (coalesce(v.recorded, @slots) = @slots OR v.recorded = 1 AND v.first_free)
    AND NOT z.paused
  ORDER BY c.slot LIMIT 1),
` + takeSpec{row: "name", from: "pick", read: "pick",
	columns: []takeColumn{{name: "slot", value: "slot"}, {name: "slots", value: "@slots"}, {name: "last_scheduled_at", update: "NULL"}},
	where:   "NOT EXISTS (SELECT FROM {lease} p WHERE p.job_name = @job::text AND p." + pausedCondition + ")", returning: ", slot"}.taken()

var takeSlotsAnswer = `
SELECT true AS taken, t.fencing_token AS token, t.slot, NULL::text AS holder, NULL::bigint AS expires_in_micros,
  NULL::text AS state, NULL::integer AS recorded, NULL::text AS foreign_name, false AS racing, ` + noPauseColumns + `
FROM taken t
UNION ALL
(SELECT false, coalesce(c.fencing_token, 0), c.slot, c.holder, ` + schema.ExpiresInMicros + `, ` + schema.HeldState + `,
  v.recorded, v.foreign_name, EXISTS (SELECT FROM pick), z.*
FROM cur c, verdict v, pause z WHERE NOT EXISTS (SELECT FROM taken)
ORDER BY (c.present AND c.expires_at > now()) DESC, c.expires_at LIMIT 1)`

// holderSQL reads who holds @job (a job's row) with a plain SELECT that
// writes and locks nothing: holder, token, the database's now() and the
// row's times, bare. It is a standby's look, sent every retry interval
// when it polls, so the server only fetches the row: readHolder works out
// the time left and the state (schema.HeldState) from these, which spares
// the server about a fifth of the statement's cost (BenchmarkLook).
var holderSQL = `SELECT holder, fencing_token AS token, expires_at, released_at, last_finished_at,
  ` + pauseColumns("l") + `
FROM {lease} AS l WHERE job_name = @job::text`

// renewSQL extends a lease: @row, @holder, @token, @ttl (microseconds). A lease
// an operator released is not renewed: the holder must stop. It answers
// renewed, and the row as it was (token, holder, released), which says why
// when nothing was renewed: gone or with an older token (a lost write),
// released, or taken over.
const renewSQL = `WITH renewed AS (
  ` + renewUpdate + `
  RETURNING 1)
SELECT EXISTS (SELECT FROM renewed) AS renewed, ` + renewRow

// renewUpdate is renewSQL's UPDATE.
const renewUpdate = `UPDATE {lease} SET
    expires_at = now() + @ttl::bigint * interval '1 microsecond',
    renewed_at = now()
  WHERE job_name = @row::text AND holder = @holder::text AND fencing_token = @token::bigint
    AND released_at IS NULL`

// renewRow is the row a renewal answers after whether it renewed.
const renewRow = `l.fencing_token AS token, l.holder, coalesce(l.released_at IS NOT NULL, false) AS released
FROM (VALUES (1)) AS one LEFT JOIN {lease} AS l ON l.job_name = @row::text`

// startAttemptSQL starts the next attempt of a run (--retries) now, under
// the same lease and token, and only if the lease is still this holder's:
// it is a renewal too, with renewSQL's parameters, conditions and answer,
// so that an attempt never starts on a lease that was released, taken over
// or deleted during the wait.
const startAttemptSQL = `WITH started AS (
  UPDATE {lease} SET
    expires_at = now() + @ttl::bigint * interval '1 microsecond',
    renewed_at = now(),
    last_started_at = now(),
    last_exit_code = NULL
  WHERE job_name = @row::text AND holder = @holder::text AND fencing_token = @token::bigint
    AND released_at IS NULL
  RETURNING 1)
SELECT EXISTS (SELECT FROM started) AS renewed, l.fencing_token AS token, l.holder, coalesce(l.released_at IS NOT NULL, false) AS released
FROM (VALUES (1)) AS one LEFT JOIN {lease} AS l ON l.job_name = @row::text`

// releaseSQL hands a lease back. Its parameters are named (releaseParams
// gives them): @row, @holder, @token, @hold_for, @exit_code, and, for the
// notification, @job (its payload), @job_channel and @table_channel. A
// lease that already expired keeps its expiry: hold-for must not bring it
// back after an operator released it. The notification goes out with the
// commit.
var releaseSQL = releaseCTE + releaseAnswer

// releaseRecordingSQL is releaseSQL that also records the run, only if the
// release happened: @slot, @outcome (NULL: no run to record), @attempt,
// @output (NULL: none kept) and @scheduled_at (NULL: a run without a
// schedule).
var releaseRecordingSQL = releaseCTE + releaseRun + releaseAnswer

// releasePruningSQL is releaseRecordingSQL that also deletes at most 100 of
// this job's own runs older than @keep microseconds, the history to keep:
// each job keeps its runs as long as its own --history-keep says (0, for
// ever, holds whatever other jobs ask). The runs are this job's by @job,
// the name the history records (a slot's runs carry the job's, not the
// row's), and are found through the (job_name, finished_at) index, oldest
// first, so a release never scans the history. It is a statement of its
// own, not releaseRecordingSQL with @keep 0, because a role without DELETE
// on the history cannot run a statement that names the DELETE at all.
var releasePruningSQL = releaseCTE + releaseRun + `,
pruned AS (
  DELETE FROM {history} WHERE ctid = ANY (ARRAY(SELECT ctid FROM {history}
    WHERE job_name = @job::text AND finished_at < now() - @keep::bigint * interval '1 microsecond'
    ORDER BY job_name, finished_at LIMIT 100)))` + releaseAnswer

// releaseCTE hands the lease back, or on to the first live standby in
// the job's queue (handoffSet: @first, @handoff) when the release frees it
// now. It commits durably, as the server's synchronous_commit says: a
// release a crash of the database lost would leave the row held until its
// expiry (safe), but the run it recorded would be closed by the next
// holder as lost, its exit status gone from the history. It returns
// whether the lease is free, or handed (to next_holder, with second the
// queue's next entry and first_micros the time it has to adopt it), and
// the run's start (from before the statement: a handoff clears it) and
// end.
//
// A slot after the first is handed on from the queue on the job's first
// row (slot_queue), which the release locks before the slot's own row:
// every statement that writes both rows locks them in that order, so
// that two of them never wait for each other. The entry handed the slot
// stays in that queue, marked (slot_handed, see markSlotHanded).
var releaseCTE = `WITH was AS (
  SELECT last_started_at, released_by FROM {lease} WHERE job_name = @row::text),
slot_queue AS (
  SELECT queue, ` + pausedCondition + ` AS paused FROM {lease}
  WHERE job_name = @job::text AND @row::text <> @job::text FOR UPDATE),
released AS (
  UPDATE {lease} AS l SET ` + handoffSet + `
  WHERE job_name = @row::text AND holder = @holder::text AND fencing_token = @token::bigint
  RETURNING l.expires_at <= now() AS free, l.fencing_token <> @token::bigint AS handed, l.holder AS next_holder,
    ` + nextInQueue + ` AS second, ` + micros("l.expires_at") + ` - ` + micros("clock_timestamp()") + ` AS first_micros,
    CASE WHEN l.fencing_token <> @token::bigint THEN ` + slotHandedTo("l") + ` END AS slot_entry, ` + micros("l.expires_at") + ` AS first_until,
    (SELECT last_started_at FROM was) AS last_started_at, now() AS last_finished_at),
slot_handed AS (
  UPDATE {lease} AS j SET queue = ` + markSlotHanded + `
  FROM released AS r WHERE j.job_name = @job::text AND r.slot_entry IS NOT NULL)`

// releaseRun records the run, once: a release sent again because its
// connection broke before the answer (a switchover ending every session)
// may have committed the first time. A stopped run records who asked:
// @stopped_by (a signal to leasewrap), or else the operator's release
// the row records (released_by, as it was before this statement).
const releaseRun = `,
run AS (
  INSERT INTO {history} (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome,
    output, scheduled_at, stopped_by)
  SELECT @job::text, @slot::integer, @holder::text, @token::bigint, @attempt::integer, coalesce(last_started_at, last_finished_at),
    last_finished_at, @exit_code::integer, @outcome::text, @output::bytea, @scheduled_at::timestamptz,
    CASE WHEN @outcome::text = '` + OutcomeStopped + `' THEN coalesce(@stopped_by::text, (SELECT released_by FROM was)) END
  FROM released WHERE @outcome::text IS NOT NULL
    AND NOT EXISTS (SELECT FROM {history} WHERE job_name = @job::text AND fencing_token = @token::bigint
      AND attempt >= @attempt::integer))`

// releaseAnswer announces a release that freed the lease on the job's own
// channel (jobChannel), where its standbys listen, so that it reaches only
// them; and on the table's channel, where standbys of earlier versions
// listen for every job of the table. A handoff is announced to the job's
// standbys as one (see handoffNotice), and as a release to the earlier
// versions, which find the lease held.
var releaseAnswer = `
SELECT CASE WHEN free OR handed THEN pg_notify(@job_channel::text, CASE WHEN free THEN @job::text
    ELSE ` + handoffPayload + ` END)::text || pg_notify(@table_channel::text, @job::text)::text END
FROM released`

// releaseAnySQL is an operator's release of a live lease: @row, @holder
// (NULL: whoever's), @force, @token (NULL: any), @by who asks and how
// (NULL: not said), and the channels of its notifications: @row_channel,
// the job channel of the row's name, and @slot_channel, that of the job a
// slot's row belongs to (releaseAnyParams gives them).
// With force the lease is free at once, for a holder known to be dead;
// without, it is only marked: the holder's next renewal fails, it stops
// its command and its own release frees the lease, so two commands never
// overlap, and records @by as who stopped its run. Either way the holder
// is told on its job's channel (stopPayload), so that a holder that
// listens renews, and stops, at once. It answers the holder and token
// released.
var releaseAnySQL = releaseAny(", released_by = @by::text")

// releaseAnyUnsaidSQL is releaseAnySQL for a lease table of an earlier
// version, without released_by (until a take or migrate adds it): @by is
// not recorded.
var releaseAnyUnsaidSQL = releaseAny("")

// releaseAny is releaseAnySQL with by, what it writes of who asks.
func releaseAny(by string) string {
	return `WITH released AS (
  UPDATE {lease} SET released_at = now()` + by + `,
    expires_at = CASE WHEN @force::boolean THEN now() ELSE expires_at END
  WHERE job_name = @row::text AND (@holder::text IS NULL OR holder = @holder::text) AND expires_at > now()
    AND (released_at IS NULL OR @force::boolean) AND (@token::bigint IS NULL OR fencing_token = @token::bigint)
  RETURNING job_name, slot, holder, fencing_token)
SELECT holder, fencing_token AS token,
  pg_notify(CASE WHEN slot > 1 THEN @slot_channel::text ELSE @row_channel::text END, ` + stopPayload + `)::text
  || CASE WHEN @force::boolean
  THEN pg_notify(CASE WHEN slot > 1 THEN @slot_channel::text ELSE @row_channel::text END, ` + schema.BaseJob + `)::text
    || pg_notify(@table_channel::text, ` + schema.BaseJob + `)::text ELSE '' END AS notified
FROM released`
}

// recordAttemptSQL records an attempt that ended while a retry follows:
// @row, @holder, @token, @job, @slot, @attempt, @exit_code,
// @outcome, @output the output it kept (NULL: none), @scheduled_at the scheduled time
// (NULL: none), @stopped_by who stopped it (NULL: nobody). The lease row forgets
// the attempt's start, so that a crash during the wait for the next one
// closes no run twice.
const recordAttemptSQL = `WITH ended AS (
  UPDATE {lease} AS l SET last_started_at = NULL, last_exit_code = @exit_code::integer
  FROM (SELECT last_started_at FROM {lease} WHERE job_name = @row::text) AS o
  WHERE l.job_name = @row::text AND l.holder = @holder::text AND l.fencing_token = @token::bigint
  RETURNING l.holder, l.fencing_token, o.last_started_at AS started)
INSERT INTO {history} (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome,
  output, scheduled_at, stopped_by)
SELECT @job::text, @slot::integer, holder, fencing_token, @attempt::integer, coalesce(started, now()), now(), @exit_code::integer, @outcome::text,
  @output::bytea, @scheduled_at::timestamptz, @stopped_by::text
FROM ended`

// recordLostSQL records a run without its lease row (see Lease.RecordLost):
// @job, @slot, @holder, @token, @attempt, @exit_code, @outcome,
// @output the output it kept (NULL: none), @scheduled_at the scheduled time
// (NULL: none), @stopped_by who stopped it (NULL: nobody, or an operator's
// release, which the row it lacks recorded), @ran how long it ran and
// @ended_ago how long ago it ended
// (microseconds, by the local clock); not when the history
// already has this attempt (or a later one) of this lease.
const recordLostSQL = `INSERT INTO {history} (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome,
  output, scheduled_at, stopped_by)
SELECT @job::text, @slot::integer, @holder::text, @token::bigint, @attempt::integer, now() - (@ran::bigint + @ended_ago::bigint) * interval '1 microsecond',
  now() - @ended_ago::bigint * interval '1 microsecond', @exit_code::integer, @outcome::text,
  @output::bytea, @scheduled_at::timestamptz, @stopped_by::text
WHERE NOT EXISTS (SELECT FROM {history} WHERE job_name = @job::text AND fencing_token = @token::bigint AND attempt >= @attempt::integer)`
