package lease

// The standbys' queue is a column of the job's lease row (queue, a jsonb
// array of entries), not a table of its own: the release that hands the
// lease on reads and rewrites it under the row lock it takes anyway, so
// that the handoff is one statement and one commit, and an instance that
// took the row took its queue with it. Standbys write it when they enter
// and leave, and a polling one now and then to say it still looks; a
// listening one never, its backend in pg_stat_activity says it is there.
//
// An entry is a JSON object: holder (its holder id), id (its own,
// random: two instances may share a holder id), priority, since (when it
// entered, microseconds since 1970, kept when it enters again), pid and
// started (a listening standby's backend and its backend_start, in
// microseconds), until and every (a polling standby's: when its entry
// stops counting, and how long it may take to look), and pinned (set by
// release --to).
//
// A job of several slots keeps its queue on its first row (the job's
// own), for every slot. A release of another slot reads it under a lock
// taken before the slot's own row, as every statement that writes both
// does (see releaseCTE), and leaves the entry it hands the slot to in
// it as a marker with handed_until, the slot's first expiry: not live,
// but a polling standby's refresh read before the handoff committed must
// not put the entry back. The slot's row keeps that entry's id and holder
// as its queue until it is adopted, so that only that entry adopts it.

// queueEntries is a queue (a jsonb column or value) as rows aliased e.
func queueEntries(queue string) string {
	return `jsonb_to_recordset(coalesce(` + queue + `, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint)`
}

// micros is a timestamptz as microseconds since 1970.
func micros(t string) string { return `(extract(epoch FROM ` + t + `) * 1000000)::bigint` }

// entryLive is true of an entry e whose standby is there: its listening
// backend is (the same pid, started at the same time: a pid is reused),
// or it looked recently enough. A backend another role's is reads no
// backend_start: its pid alone says.
var entryLive = `(e.until > ` + micros("now()") + ` OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce(` + micros("a.backend_start") + `, e.started) = e.started))`

// entryKept is true of an entry e a rewrite of the queue keeps: live, or
// the marker of a slot handed to it that it may still adopt.
var entryKept = `(` + entryLive + ` OR e.handed_until > ` + micros("now()") + `)`

// queueOrder is the order of a queue's entries e: pinned first, then
// higher priority, then first come.
const queueOrder = `e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id`

// queueWithout is the queue column of row without the entries that match
// cond (on entry x, a jsonb object).
func queueWithout(row, cond string) string {
	return `coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements(` + row + `.queue) AS x WHERE NOT (` + cond + `)), '[]'::jsonb)`
}

// handed is true of the lease row aliased row when it was handed to a
// standby that has not started its command yet: a handoff leaves the
// run's start and the renewal empty, and the standby's first statement
// (adoptSQL) fills both.
func handed(row string) string {
	return `(` + row + `.renewed_at IS NULL AND ` + row + `.last_started_at IS NULL AND ` + row + `.last_finished_at IS NULL
    AND ` + row + `.acquired_at IS NOT NULL)`
}

// handoffQueue is the queue a release of row l (@row of @job) hands the
// lease on from: its own, or, for a slot after the first, the job's first
// row's (slot_queue, see releaseCTE).
const handoffQueue = `CASE WHEN @row::text = @job::text THEN l.queue ELSE (SELECT queue FROM slot_queue) END`

// handoffSet is what a release that hands the lease on writes over the
// row l, the next entry being n (with n.id NULL: no handoff) and f.expires
// the expiry a plain release would leave: a live lease of n's holder, a
// new token, a first expiry of @first microseconds (and the longest a
// polling standby may take to look, n.every) that the standby must renew
// within, counted from when the row was locked (a release that waited for
// the lock must not shorten it), no run started and no exit status (the
// ended run's is in the history: the row's belongs to its holder's run),
// no operator's release pending (released_by, recorded with the run),
// and the queue without n
// and without the entries that are not kept (a slot's row: n alone, see
// above). Without n, the release's own. An entry of the releasing
// holder's own id is passed over: it is another instance sharing the
// id, or this one's own, left by a take. A paused job is not handed on.
var handoffSet = `(expires_at, released_at, released_by, last_finished_at, last_exit_code, holder, last_holder, fencing_token, acquired_at,
    renewed_at, last_started_at, last_scheduled_at, queue) = (
  SELECT CASE WHEN n.id IS NULL THEN f.expires ELSE clock_timestamp() + (@first::bigint + coalesce(n.every, 0)) * interval '1 microsecond' END,
    CASE WHEN n.id IS NULL THEN now() END,
    NULL,
    CASE WHEN n.id IS NULL THEN now() END,
    CASE WHEN n.id IS NULL THEN @exit_code::integer END,
    coalesce(n.holder, l.holder), coalesce(n.holder, l.last_holder),
    CASE WHEN n.id IS NULL THEN l.fencing_token ELSE greatest(l.fencing_token + 1, ` + clockToken + `) END,
    CASE WHEN n.id IS NULL THEN l.acquired_at ELSE now() END,
    CASE WHEN n.id IS NULL THEN l.renewed_at END,
    CASE WHEN n.id IS NULL THEN l.last_started_at END,
    CASE WHEN n.id IS NULL THEN l.last_scheduled_at END,
    CASE WHEN n.id IS NULL THEN l.queue
      WHEN @row::text <> @job::text THEN jsonb_build_array(jsonb_build_object('id', n.id, 'holder', n.holder))
      ELSE (SELECT coalesce(jsonb_agg(to_jsonb(e)), '[]'::jsonb) FROM ` + queueEntries("l.queue") + `
        WHERE e.id <> n.id AND ` + entryKept + `) END
  FROM (SELECT CASE WHEN l.expires_at <= now() THEN l.expires_at
      ELSE greatest(now(), l.acquired_at + @hold_for::bigint * interval '1 microsecond') END AS expires) AS f
  LEFT JOIN LATERAL (SELECT e.holder, e.id, e.every FROM ` + queueEntries(handoffQueue) + `
    WHERE @handoff::boolean AND f.expires <= now()
      AND NOT coalesce(CASE WHEN @row::text = @job::text THEN l.` + pausedCondition + ` ELSE (SELECT paused FROM slot_queue) END, false)
      AND e.holder <> @holder::text AND ` + entryLive + `
    ORDER BY ` + queueOrder + ` LIMIT 1) AS n ON true)`

// nextInQueue is the id of the first live entry of the queue a release
// of row l handed the lease on from, after the entry it handed it to.
var nextInQueue = `(SELECT e.id FROM ` + queueEntries(handoffQueue) + ` WHERE ` + entryLive + `
    AND e.id IS DISTINCT FROM ` + slotHandedTo("l") + ` ORDER BY ` + queueOrder + ` LIMIT 1)`

// slotHandedTo is, for a slot's row (after the first) just handed on by
// a release of @row of @job, the id of the entry it was handed to.
func slotHandedTo(row string) string {
	return `CASE WHEN @row::text <> @job::text THEN ` + row + `.queue->0->>'id' END`
}

// markSlotHanded is the queue of the job's first row j after a release
// r handed a slot to the entry r.slot_entry: that entry as a marker of
// the handoff until r.first_until, the others kept.
var markSlotHanded = `(SELECT coalesce(jsonb_agg(CASE WHEN e.id = r.slot_entry THEN jsonb_build_object('id', e.id, 'holder', e.holder,
    'priority', e.priority, 'since', e.since, 'handed_until', r.first_until) ELSE to_jsonb(e) END), '[]'::jsonb)
  FROM ` + queueEntries("j.queue") + ` WHERE e.id = r.slot_entry OR ` + entryKept + `)`

// enterQueueSQL puts a standby in its job's queue, or refreshes its
// entry: @job, @holder, @id, @priority, @listening (its entry is alive
// while this connection is), @live and @every (microseconds, a polling
// standby's: how long its entry counts, how long it may take to look).
// An entry entered again keeps its place and its pin. It answers nothing
// when the job has no row, and changes nothing while the lease is handed
// to @holder and not adopted: a refresh read before a handoff committed
// must not put back the entry the handoff took out (or marked, for a
// slot), or the standby could not adopt the lease (adoptSQL).
var enterQueueSQL = enterQueue + `
RETURNING 1`

// enterQueue is enterQueueSQL's UPDATE, without its answer.
var enterQueue = `UPDATE {lease} AS l SET queue = ` + queueWithout("l", `x->>'id' = @id::text`) + ` || jsonb_build_array(
  jsonb_build_object('since', ` + micros("clock_timestamp()") + `, 'pinned', false)
  || coalesce((SELECT jsonb_build_object('since', x->'since', 'pinned', x->'pinned')
    FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text LIMIT 1), '{}'::jsonb)
  || jsonb_build_object('holder', @holder::text, 'id', @id::text, 'priority', @priority::integer,
    'pid', CASE WHEN @listening::boolean THEN pg_catalog.pg_backend_pid() END,
    'started', CASE WHEN @listening::boolean THEN (SELECT ` + micros("a.backend_start") + `
      FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) AS a) END,
    'until', CASE WHEN NOT @listening::boolean THEN ` + micros("now()") + ` + @live::bigint END,
    'every', CASE WHEN NOT @listening::boolean THEN @every::bigint END))
WHERE job_name = @job::text AND NOT ` + handedToHolder + ` AND NOT ` + slotMarkedHere

// leaveQueueSQL takes a standby's entry (@id) out of @job's queue. A
// lease (or a slot of @slots) handed to it that it has not adopted
// (@holder's: it is leaving as a release chose it) it frees, and says so
// on @job_channel as a release does: the next take records it
// could_not_start. Besides the job's first row it writes at most the row
// of a slot handed to this standby, which nobody else writes until it
// lapses: it cannot wait in a cycle with a release (see releaseCTE).
var leaveQueueSQL = `WITH left_queue AS (
  UPDATE {lease} AS l SET queue = CASE WHEN l.job_name = @job::text THEN ` + queueWithout("l", `x->>'id' = @id::text`) + ` END,
    expires_at = CASE WHEN ` + handedEntryHere + ` THEN now() ELSE l.expires_at END
  WHERE job_name IN ` + slotRows + ` AND (l.job_name = @job::text AND ` + inQueueHere + ` OR ` + handedEntryHere + `)
  RETURNING l.expires_at = now() AND l.holder = @holder::text AND ` + handed("l") + ` AS freed)
SELECT pg_notify(@job_channel::text, @job::text) FROM left_queue WHERE freed LIMIT 1`

// slotRows are the names of the rows of @job's @slots slots, as SlotRow
// names them.
const slotRows = `(SELECT ` + slotRowName + ` FROM generate_series(1, @slots::integer) AS g)`

// slotRowName is the name of slot g's row of @job (see SlotRow).
const slotRowName = `CASE WHEN g = 1 THEN @job::text ELSE @job::text || '#' || g END`

// inQueueHere is true of the lease row l while its queue has the entry
// @id, queued or marked.
const inQueueHere = `coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false)`

// queuedHere is true of the lease row l while its queue has the entry
// @id waiting (not marked as handed a slot).
const queuedHere = `EXISTS (SELECT FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text AND x->>'handed_until' IS NULL)`

// slotMarkedHere is true of the job's first row l while its queue marks
// the entry @id as handed a slot it may still adopt.
var slotMarkedHere = `EXISTS (SELECT FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text
    AND (x->>'handed_until')::bigint > ` + micros("now()") + `)`

// handedToHolder is true of the lease row l while it is handed to @holder
// and not adopted.
var handedToHolder = `coalesce(l.holder = @holder::text AND ` + handed("l") + ` AND l.expires_at > now(), false)`

// handedEntryHere is true of the lease row l (a row of @job's slots)
// while it is handed to the entry @id and not adopted: the job's first
// row, to @holder with the entry out of the queue (or to an instance
// sharing its holder id, which then cannot adopt it either: safe);
// another slot's, to the entry its queue names.
var handedEntryHere = `(` + handedToHolder + ` AND CASE WHEN l.job_name = @job::text THEN NOT ` + inQueueHere + `
    ELSE ` + inQueueHere + ` END)`

// adoptSQL is a standby's first statement on a lease handed to it: @job,
// @slots, @holder, @id, @ttl (microseconds). It renews the lease (the
// row of whichever slot was handed) and starts the run, only while the
// handoff is live and not yet adopted, and only by the entry it was for
// (an instance with the same holder id still queued is not that entry).
// It answers the token and the slot; no row: nothing was handed to this
// standby.
var adoptSQL = `UPDATE {lease} AS l SET
    expires_at = now() + @ttl::bigint * interval '1 microsecond',
    renewed_at = now(),
    last_started_at = now(),
    released_by = NULL,
    queue = CASE WHEN l.job_name = @job::text THEN l.queue END
WHERE job_name IN ` + slotRows + ` AND ` + handedEntryHere + ` AND released_at IS NULL
RETURNING fencing_token AS token, coalesce(slot, 1) AS slot`

// queueLookSQL is a queued standby's look (holderSQL's columns) with its
// place: @job, @holder, @id, @first, and for a job of several slots
// @slots. full says whether the lease is live, or for a job of several
// slots every slot; then slot, slot_holder, slot_token and
// slot_expires_at name the slot that expires first (the job's first row
// says nothing of the others). It also answers ahead, how many entries
// come before this standby's (all of them when it has none): while the
// job is full, any, which is enough to say how often to look; else only
// the live ones, which the head of the queue must not wait for. Reading
// pg_stat_activity copies every backend's status, so a look at a full
// job, the common one, does not. An entry ahead counts only for its
// turn, and turn_left_micros says when the first of those turns ends
// (the standby looks again then). After a release, a turn lasts until
// the job has been free for @first microseconds (FirstExpiry) and the
// entry's own polling interval, as long as a standby handed the lease
// has to adopt it. Free counts from the end of a pause (paused_until,
// which Resume sets to its own time) when that came later: a pause lets
// every turn lapse, and the queue's order holds after it as after a
// release. A lease that expired unreleased (its holder died) gives the
// head @retry microseconds (a retry interval): every standby looks just
// after the expiry it saw, the head too, and no later than a retry
// interval after it; so a head that died within its entry's life, or
// froze, holds the lease up no longer, and a standby behind it takes
// over within the TTL and a retry interval of the crash. queued says
// whether it has an entry waiting, until_micros how long its entry
// still counts (a polling standby's), and handed whether the lease, or
// a slot, is handed to it and not yet adopted.
//
// The single-slot look, a polling fleet's most frequent statement, is a
// statement of its own, with no parameter that a plan could fold: such a
// parameter makes PostgreSQL plan the statement anew at every execution,
// which more than doubled its cost. It has no slot markers to look for.
func queueLookSQL(slots bool) string {
	full, freeSince, queued, handedHere := `l.expires_at > now()`, `l.expires_at`, inQueueHere, handedToHolder
	unreleased := `l.released_at IS NULL AND NOT ` + handed("l")
	slotColumns := `NULL::integer AS slot, NULL::text AS slot_holder, NULL::bigint AS slot_token, NULL::timestamptz AS slot_expires_at`
	from := `{lease} AS l`
	if slots {
		full, freeSince, queued, handedHere = `f.full`, `f.free_since`, queuedHere, handedToHolder+` OR `+slotMarkedHere
		unreleased = `f.unreleased`
		slotColumns = `f.slot, f.slot_holder, f.slot_token, f.slot_expires_at`
		from = `{lease} AS l, LATERAL (
  SELECT coalesce(s.live = @slots::integer, false) AS full,
    CASE WHEN s.rows = @slots::integer THEN s.expires_at ELSE '-infinity' END AS free_since,
    coalesce(s.rows = @slots::integer AND s.released_at IS NULL AND NOT ` + handed("s") + `, false) AS unreleased,
    s.slot, s.holder AS slot_holder, s.fencing_token AS slot_token, s.expires_at AS slot_expires_at
  FROM (VALUES (1)) AS one LEFT JOIN (
    SELECT coalesce(r.slot, 1) AS slot, r.holder, r.fencing_token, r.expires_at,
      r.released_at, r.acquired_at, r.renewed_at, r.last_started_at, r.last_finished_at,
      count(*) FILTER (WHERE r.expires_at > now()) OVER () AS live, count(*) OVER () AS rows
    FROM {lease} AS r WHERE r.job_name IN ` + slotRows + `
    ORDER BY r.expires_at LIMIT 1) AS s ON true) AS f`
	}
	// turnEnd is when entry e's turn ends (see above): a pause that ended
	// after the expiry makes it a release's.
	turnEnd := `CASE WHEN ` + unreleased + ` AND coalesce(l.paused_until < ` + freeSince + `, true)
      THEN ` + freeSince + ` + @retry::bigint * interval '1 microsecond'
      ELSE greatest(` + freeSince + `, l.paused_until) + (@first::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END`
	return `SELECT holder, l.fencing_token AS token, l.expires_at, l.released_at, l.last_finished_at,
  ` + pauseColumns("l") + `,
  a.ahead, a.turn_left_micros,
  (SELECT e.until - ` + micros("now()") + ` FROM ` + queueEntries("l.queue") + ` WHERE e.id = @id::text) AS until_micros,
  ` + queued + ` AS queued,
  ` + handedHere + ` AS handed,
  ` + full + ` AS full, ` + slotColumns + `
FROM ` + from + `, LATERAL (
  SELECT count(*) FILTER (WHERE NOT q.passed) AS ahead,
    (extract(epoch FROM min(q.turn_end) FILTER (WHERE NOT q.passed AND isfinite(q.turn_end)) - now()) * 1000000)::bigint AS turn_left_micros
  FROM (SELECT bool_or(e.id = @id::text) OVER (ORDER BY ` + queueOrder + `) AS passed, ` + turnEnd + ` AS turn_end
    FROM ` + queueEntries("l.queue") + `
    WHERE e.id = @id::text OR ` + full + ` OR ` + entryLive + ` AND now() < ` + turnEnd + `) AS q) AS a
WHERE l.job_name = @job::text`
}

// pinSQL makes @to's entry in @row's queue the next to be handed the
// lease (release --to): it answers the queue's holders in order, and
// whether @to is among them (nothing is changed when not).
var pinSQL = `WITH q AS (
  SELECT array_agg(e.holder ORDER BY ` + queueOrder + `) FILTER (WHERE ` + entryLive + `) AS holders
  FROM {lease} AS l, ` + queueEntries("l.queue") + ` WHERE l.job_name = @row::text),
pinned AS (
  UPDATE {lease} AS l SET queue = (SELECT jsonb_agg(x || jsonb_build_object('pinned', x->>'holder' = @to::text)) FROM jsonb_array_elements(l.queue) AS x)
  WHERE job_name = @row::text AND @to::text = ANY (coalesce((SELECT holders FROM q), '{}'))
  RETURNING 1)
SELECT coalesce((SELECT holders FROM q), '{}') AS holders, EXISTS (SELECT FROM pinned) AS pinned`

// handoffPayload is the notification of a handoff on the job's channel,
// from releaseCTE's answer: lines "handoff", the new holder, the queue's
// next entry ("" for none), the microseconds the holder has to adopt the
// lease, and the job last (see handoffNotice). A job's own name cannot
// start so: a new job's name has no control characters.
const handoffPayload = `'` + handoffTag + `' || E'\n' || next_holder || E'\n' || coalesce(second, '') || E'\n' || first_micros || E'\n' || @job::text`

// QueueSQL is an SQL expression that reads the queue of the lease row
// aliased row, for the views: its live entries in the order a release
// hands the lease on, as a JSON array that ParseQueue reads.
func QueueSQL(row string) string {
	return `(SELECT coalesce(jsonb_agg(jsonb_build_object('holder', e.holder, 'priority', e.priority,
    'pinned', e.pinned IS TRUE, 'listening', e.pid IS NOT NULL, 'since', e.since) ORDER BY ` + queueOrder + `), '[]'::jsonb)
  FROM ` + queueEntries(row+".queue") + ` WHERE ` + entryLive + `)`
}
