package lease

import "strconv"

// statements holds the SQL for one table. The table name is quoted once with
// pgx.Identifier.Sanitize; every value is a bind parameter.
type statements struct {
	acquire, holder, renew, release, releaseAny, status, startAttempt string
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
  released_at = NULL`

// clockToken is the database clock in microseconds since 1970, the floor of
// every new fencing token.
const clockToken = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// heldState says how a live lease is held: StateHeld, StateKept (the
// command finished, hold-for keeps it) or StateReleasing (an operator asked
// the holder to stop). A release without hold-for (or after it ran out, or
// forced) sets expires_at to its own now(), so expires_at <= released_at:
// that lease is StateReleased even where it still looks live, to a
// statement whose now() is older than the release (the first take of a
// wrapper runs after its shape checks, in their transaction, and a release
// that commits in between looks live to it for those milliseconds), or
// when the row is read after its expiry.
const heldState = `CASE WHEN released_at IS NULL THEN 'held' WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END`

// leaseState is the state of any lease row: heldState while it is live,
// else StateReleased (handed back) or StateExpired (never released).
const leaseState = `CASE WHEN expires_at > now() THEN ` + heldState + ` WHEN released_at IS NOT NULL THEN 'released' ELSE 'expired' END`

// A lease is live while expires_at > now(); all times come from the database
// clock. Durations are passed in microseconds.
func newStatements(table string) statements {
	return statements{
		// See acquireSQL.
		acquire: acquireSQL(table, ""),

		holder: `SELECT holder,
  ` + micros + `,
  fencing_token, ` + heldState + `
FROM ` + table + ` WHERE job_name = $1::text`,

		// A lease an operator released is not renewed: the holder must stop.
		// When nothing was renewed, the row as it was says why: gone or with
		// an older token (a lost write), released, or taken over.
		renew: `WITH renewed AS (
  UPDATE ` + table + ` SET
    expires_at = now() + $4::bigint * interval '1 microsecond',
    renewed_at = now()
  WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint
    AND released_at IS NULL
  RETURNING 1)
SELECT EXISTS (SELECT FROM renewed), l.fencing_token, l.holder, coalesce(l.released_at IS NOT NULL, false)
FROM (VALUES (1)) AS one LEFT JOIN ` + table + ` AS l ON l.job_name = $1::text`,

		release: releaseSQL(table, "", false),

		// The next attempt of a run (--retries) starts now, under the same
		// lease and token, and only if the lease is still this holder's: it
		// is a renewal too, with renew's conditions and answer, so that an
		// attempt never starts on a lease that was released, taken over or
		// deleted during the wait.
		startAttempt: `WITH started AS (
  UPDATE ` + table + ` SET
    expires_at = now() + $4::bigint * interval '1 microsecond',
    renewed_at = now(),
    last_started_at = now(),
    last_exit_code = NULL
  WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint
    AND released_at IS NULL
  RETURNING 1)
SELECT EXISTS (SELECT FROM started), l.fencing_token, l.holder, coalesce(l.released_at IS NOT NULL, false)
FROM (VALUES (1)) AS one LEFT JOIN ` + table + ` AS l ON l.job_name = $1::text`,

		// An operator's release of a live lease. With $3 (force) the lease is
		// free at once, for a holder known to be dead; without, it is only
		// marked: the holder's next renewal fails, it stops its command and
		// its own release frees the lease, so two commands never overlap.
		releaseAny: `WITH released AS (
  UPDATE ` + table + ` SET released_at = now(),
    expires_at = CASE WHEN $3::boolean THEN now() ELSE expires_at END
  WHERE job_name = $1::text AND ($2::text IS NULL OR holder = $2::text) AND expires_at > now()
    AND (released_at IS NULL OR $3::boolean) AND ($5::bigint IS NULL OR fencing_token = $5::bigint)
  RETURNING job_name, slot, holder, fencing_token)
SELECT holder, fencing_token, CASE WHEN $3::boolean THEN pg_notify($4::text, ` + baseJob + `)::text END FROM released`,

		// Slot rows (slot > 1) are named job#slot and shown under their job.
		status: `SELECT ` + baseJob + ` AS job, holder, fencing_token,
  ` + micros + `,
  ` + leaseState + `,
  last_started_at, last_finished_at, last_exit_code, last_holder, coalesce(slot, 1), coalesce(slots, 1)
FROM ` + table + ` WHERE $1::text IS NULL OR job_name = $1::text OR (slot > 1 AND job_name = $1::text || '#' || slot)
ORDER BY job, coalesce(slot, 1)`,
	}
}

// baseJob is a lease row's job: its name, less the "#N" of a slot row.
const baseJob = `CASE WHEN slot > 1 THEN left(job_name, length(job_name) - length('#' || slot)) ELSE job_name END`

// micros is how long until expiry, in microseconds (negative once expired).
const micros = `(extract(epoch FROM expires_at - now()) * 1000000)::bigint`

// acquireSQL is the take of a single-slot job. With a history table, the
// same statement closes the run of a holder that never released (it
// crashed, or was cut off) as lost, from the row as this statement found
// it; the take is conditional on the token it read, so that the run it
// closes is the one it replaced.
//
// Takes a free or expired row; a live one (even our own id's) is left
// alone, so RETURNING gives no row. The token rises on every take and
// never repeats: it is at least the database clock in microseconds, so a
// row that was deleted, truncated or lost in a failover cannot hand out a
// token again that a holder before it had. Setting job_name (to itself)
// makes the take lock the row like a key update, so it waits for any
// transaction in which leasewrap_check holds the row FOR KEY SHARE;
// renewals do not, and do not wait. A row of a job run with --slots N > 1
// (slots is set) is not taken: the caller refuses the mismatch.
//
// One round trip either way: when the take does not happen, the same
// statement reads the holder it found, from the statement's snapshot (a
// CTE's SELECT does not see the INSERT's row).
func acquireSQL(table, history string) string {
	lost := ""
	if history != "" {
		lost = `,
lost AS (
  INSERT INTO ` + history + ` (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome)
  SELECT $1::text, 1, o.holder, o.fencing_token, ` + nextAttempt(history, "$1::text", "o.fencing_token") + `,
    o.last_started_at, greatest(o.expires_at, o.last_started_at), '` + OutcomeLost + `'
  FROM old o WHERE EXISTS (SELECT FROM taken) AND o.last_started_at IS NOT NULL AND o.last_finished_at IS NULL)`
	}
	return `WITH old AS (
  SELECT fencing_token, holder, expires_at, last_started_at, last_finished_at FROM ` + table + ` WHERE job_name = $1::text),
taken AS (
INSERT INTO ` + table + ` AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder)
VALUES ($1::text, $2::text, now() + $3::bigint * interval '1 microsecond', ` + clockToken + `, now(), now(), now(), $2)
ON CONFLICT (job_name) DO UPDATE SET
  ` + takeSet + `
WHERE l.expires_at <= now() AND coalesce(l.slots, 1) = 1
  AND l.fencing_token = (SELECT fencing_token FROM old)
RETURNING fencing_token)` + lost + `
SELECT true, fencing_token, NULL::text, NULL::bigint, NULL::text, 1 FROM taken
UNION ALL
SELECT false, fencing_token, holder, ` + micros + `, ` + heldState + `, coalesce(slots, 1)
FROM ` + table + ` WHERE job_name = $1::text AND NOT EXISTS (SELECT FROM taken)`
}

// nextAttempt numbers a run closed for its holder: one more than the
// attempts of its lease (job, token) already recorded (--retries).
func nextAttempt(history, job, token string) string {
	return `1 + (SELECT count(*) FROM ` + history + ` h WHERE h.job_name = ` + job + ` AND h.fencing_token = ` + token + `)`
}

// releaseSQL hands a lease back: $1 row, $2 holder, $3 token, $4 hold-for,
// $5 exit code, $6 channel, $7 job (the notification's payload), and with
// a history table $8 slot, $9 outcome (NULL: no run to record), $10 the
// attempt, and with pruning $11 the history to keep. The run is recorded in the same
// statement as the release, only if the release happened. Pruning deletes
// at most pruneBatch of this job's own runs older than its keep: each job
// keeps its runs as long as its own --history-keep says (0, for ever,
// holds whatever other jobs ask). The runs are this job's by $7, the name
// the history records (a slot's runs carry the job's, not the row's), and
// are found through the (job_name, finished_at) index, oldest first, so a
// release never scans the history.
//
// A lease that already expired keeps its expiry: hold-for must not bring
// it back after an operator released it. The notification goes out with
// the commit, to standbys listening on the table's channel.
func releaseSQL(table, history string, prune bool) string {
	extra := ""
	if history != "" {
		extra = `,
run AS (
  INSERT INTO ` + history + ` (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome)
  SELECT $7::text, $8::integer, $2::text, $3::bigint, $10::integer, coalesce(last_started_at, last_finished_at), last_finished_at,
    $5::integer, $9::text
  FROM released WHERE $9::text IS NOT NULL)`
	}
	if history != "" && prune {
		extra += `,
pruned AS (
  DELETE FROM ` + history + ` WHERE ctid = ANY (ARRAY(SELECT ctid FROM ` + history + `
    WHERE job_name = $7::text AND finished_at < now() - $11::bigint * interval '1 microsecond'
    ORDER BY job_name, finished_at LIMIT ` + strconv.Itoa(pruneBatch) + `)))`
	}
	return `WITH released AS (
  UPDATE ` + table + ` SET
    expires_at = CASE WHEN expires_at <= now() THEN expires_at
      ELSE greatest(now(), acquired_at + $4::bigint * interval '1 microsecond') END,
    released_at = now(),
    last_finished_at = now(),
    last_exit_code = $5::integer
  WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint
  RETURNING expires_at <= now() AS free, last_started_at, last_finished_at)` + extra + `
SELECT CASE WHEN free THEN pg_notify($6::text, $7::text)::text END FROM released`
}
