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

// queueEntries is a queue (a jsonb column or value) as rows aliased e.
func queueEntries(queue string) string {
	return `jsonb_to_recordset(coalesce(` + queue + `, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean)`
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

// handoffSet is what a release that hands the lease on writes over the
// row l, the next entry being n (with n.id NULL: no handoff) and f.expires
// the expiry a plain release would leave: a live lease of n's holder, a
// new token, a first expiry of @first microseconds (and the longest a
// polling standby may take to look, n.every) that the standby must renew
// within, counted from when the row was locked (a release that waited for
// the lock must not shorten it), no run started, and the queue without n and without the
// entries that are not live. Without n, the release's own. An entry of
// the releasing holder's own id is passed over: it is another instance
// sharing the id, or this one's own, left by a take.
var handoffSet = `(expires_at, released_at, last_finished_at, last_exit_code, holder, last_holder, fencing_token, acquired_at,
    renewed_at, last_started_at, last_scheduled_at, queue) = (
  SELECT CASE WHEN n.id IS NULL THEN f.expires ELSE clock_timestamp() + (@first::bigint + coalesce(n.every, 0)) * interval '1 microsecond' END,
    CASE WHEN n.id IS NULL THEN now() END,
    CASE WHEN n.id IS NULL THEN now() END,
    @exit_code::integer,
    coalesce(n.holder, l.holder), coalesce(n.holder, l.last_holder),
    CASE WHEN n.id IS NULL THEN l.fencing_token ELSE greatest(l.fencing_token + 1, ` + clockToken + `) END,
    CASE WHEN n.id IS NULL THEN l.acquired_at ELSE now() END,
    CASE WHEN n.id IS NULL THEN l.renewed_at END,
    CASE WHEN n.id IS NULL THEN l.last_started_at END,
    CASE WHEN n.id IS NULL THEN l.last_scheduled_at END,
    CASE WHEN n.id IS NULL THEN l.queue ELSE (SELECT coalesce(jsonb_agg(to_jsonb(e)), '[]'::jsonb)
      FROM ` + queueEntries("l.queue") + ` WHERE e.id <> n.id AND ` + entryLive + `) END
  FROM (SELECT CASE WHEN l.expires_at <= now() THEN l.expires_at
      ELSE greatest(now(), l.acquired_at + @hold_for::bigint * interval '1 microsecond') END AS expires) AS f
  LEFT JOIN LATERAL (SELECT e.holder, e.id, e.every FROM ` + queueEntries("l.queue") + `
    WHERE @handoff::boolean AND f.expires <= now() AND NOT coalesce(l.` + pausedCondition + `, false)
      AND e.holder <> @holder::text AND ` + entryLive + `
    ORDER BY ` + queueOrder + ` LIMIT 1) AS n ON true)`

// nextInQueue is the id of the first live entry of the queue of row l.
var nextInQueue = `(SELECT e.id FROM ` + queueEntries("l.queue") + ` WHERE ` + entryLive + ` ORDER BY ` + queueOrder + ` LIMIT 1)`

// enterQueueSQL puts a standby in its job's queue, or refreshes its
// entry: @job, @holder, @id, @priority, @listening (its entry is alive
// while this connection is), @live and @every (microseconds, a polling
// standby's: how long its entry counts, how long it may take to look).
// An entry entered again keeps its place and its pin. It answers nothing
// when the job has no row, and changes nothing while the lease is handed
// to @holder and not adopted: a refresh read before a handoff committed
// must not put back the entry the handoff took out, or the standby could
// not adopt the lease (adoptSQL).
var enterQueueSQL = `UPDATE {lease} AS l SET queue = ` + queueWithout("l", `x->>'id' = @id::text`) + ` || jsonb_build_array(
  jsonb_build_object('since', ` + micros("clock_timestamp()") + `, 'pinned', false)
  || coalesce((SELECT jsonb_build_object('since', x->'since', 'pinned', x->'pinned')
    FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text LIMIT 1), '{}'::jsonb)
  || jsonb_build_object('holder', @holder::text, 'id', @id::text, 'priority', @priority::integer,
    'pid', CASE WHEN @listening::boolean THEN pg_catalog.pg_backend_pid() END,
    'started', CASE WHEN @listening::boolean THEN (SELECT ` + micros("a.backend_start") + `
      FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) AS a) END,
    'until', CASE WHEN NOT @listening::boolean THEN ` + micros("now()") + ` + @live::bigint END,
    'every', CASE WHEN NOT @listening::boolean THEN @every::bigint END))
WHERE job_name = @job::text AND NOT ` + handedToHolder + `
RETURNING 1`

// leaveQueueSQL takes a standby's entry (@id) out of @job's queue. A
// lease handed to it that it has not adopted (@holder's: it is leaving
// as a release chose it) it frees, and says so on @job_channel as a
// release does: the next take records it could_not_start.
var leaveQueueSQL = `WITH left_queue AS (
  UPDATE {lease} AS l SET queue = ` + queueWithout("l", `x->>'id' = @id::text`) + `,
    expires_at = CASE WHEN ` + handedHere + ` THEN now() ELSE l.expires_at END
  WHERE job_name = @job::text AND (` + queuedHere + ` OR ` + handedHere + `)
  RETURNING l.expires_at = now() AND l.holder = @holder::text AND ` + handed("l") + ` AS freed)
SELECT pg_notify(@job_channel::text, @job::text) FROM left_queue WHERE freed`

// queuedHere is true of the lease row l while its queue has the entry
// @id.
const queuedHere = `coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false)`

// handedToHolder is true of the lease row l while it is handed to @holder
// and not adopted.
var handedToHolder = `coalesce(l.holder = @holder::text AND ` + handed("l") + ` AND l.expires_at > now(), false)`

// handedHere is handedToHolder with the entry @id out of the queue:
// handed to this standby (or to one sharing its holder id, which then
// cannot adopt it either: safe).
var handedHere = `(` + handedToHolder + ` AND NOT ` + queuedHere + `)`

// adoptSQL is a standby's first statement on a lease handed to it: @row,
// @holder, @id, @ttl (microseconds). It renews the lease and starts the
// run, only while the handoff is live and not yet adopted, and only by the
// entry it was for (an instance with the same holder id still queued is
// not that entry). It answers the token; no row: nothing was handed to
// this standby.
var adoptSQL = `UPDATE {lease} AS l SET
    expires_at = now() + @ttl::bigint * interval '1 microsecond',
    renewed_at = now(),
    last_started_at = now()
WHERE job_name = @row::text AND ` + handedHere + ` AND released_at IS NULL
RETURNING fencing_token`

// queueLookSQL is a queued standby's look (holderSQL's columns) with its
// place: @job, @holder, @id. It also answers ahead, how many entries come
// before this standby's (all of them when it has none): while the lease
// is free, only the live ones, which the head of the queue must not wait
// for; while it is held, any, which is enough to say how often to look.
// Reading pg_stat_activity copies every backend's status, so a look at a
// held lease, the common one, does not. queued says whether it has an
// entry, until_micros how long its entry still counts (a polling
// standby's), and handed whether the lease is handed to this holder id
// and not yet adopted.
var queueLookSQL = `SELECT holder, fencing_token AS token, expires_at, released_at, last_finished_at,
  ` + pauseColumns("l") + `,
  (SELECT coalesce(min(q.n) FILTER (WHERE q.id = @id::text) - 1, count(*)) FROM (
    SELECT e.id, row_number() OVER (ORDER BY ` + queueOrder + `) AS n FROM ` + queueEntries("l.queue") + `
    WHERE e.id = @id::text OR l.expires_at > now() OR ` + entryLive + `) AS q) AS ahead,
  (SELECT e.until - ` + micros("now()") + ` FROM ` + queueEntries("l.queue") + ` WHERE e.id = @id::text) AS until_micros,
  ` + queuedHere + ` AS queued,
  ` + handedToHolder + ` AS handed
FROM {lease} AS l WHERE job_name = @job::text`

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
