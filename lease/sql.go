package lease

// statements holds the SQL for one table. The table name is quoted once with
// pgx.Identifier.Sanitize; every value is a bind parameter.
type statements struct {
	acquire, holder, renew, release, releaseAny, status string
}

// clockToken is the database clock in microseconds since 1970, the floor of
// every new fencing token.
const clockToken = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// heldState says how a live lease is held: StateHeld, StateKept (the
// command finished, hold-for keeps it) or StateReleasing (an operator asked
// the holder to stop).
const heldState = `CASE WHEN released_at IS NULL THEN 'held' WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END`

// A lease is live while expires_at > now(); all times come from the database
// clock. Durations are passed in microseconds.
func newStatements(table string) statements {
	return statements{
		// Takes a free or expired row; a live one (even our own id's) is left
		// alone, so RETURNING gives no row. The token rises on every take and
		// never repeats: it is at least the database clock in microseconds,
		// so a row that was deleted, truncated or lost in a failover cannot
		// hand out a token again that a holder before it had.
		// Setting job_name (to itself) makes the take lock the row like a key
		// update, so it waits for any transaction in which leasewrap_check
		// holds the row FOR KEY SHARE; renewals do not, and do not wait.
		//
		// One round trip either way: when the take does not happen, the
		// same statement reads the holder it found, from the statement's
		// snapshot (a CTE's SELECT does not see the INSERT's row).
		acquire: `WITH taken AS (
INSERT INTO ` + table + ` AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder)
VALUES ($1::text, $2::text, now() + $3::bigint * interval '1 microsecond', ` + clockToken + `, now(), now(), now(), $2)
ON CONFLICT (job_name) DO UPDATE SET
  job_name = excluded.job_name,
  holder = excluded.holder,
  expires_at = excluded.expires_at,
  fencing_token = greatest(l.fencing_token + 1, ` + clockToken + `),
  acquired_at = now(),
  renewed_at = now(),
  last_started_at = now(),
  last_finished_at = NULL,
  last_exit_code = NULL,
  last_holder = excluded.holder,
  released_at = NULL
WHERE l.expires_at <= now()
RETURNING fencing_token)
SELECT true, fencing_token, NULL::text, NULL::bigint, NULL::text FROM taken
UNION ALL
SELECT false, fencing_token, holder, (extract(epoch FROM expires_at - now()) * 1000000)::bigint, ` + heldState + `
FROM ` + table + ` WHERE job_name = $1::text AND NOT EXISTS (SELECT FROM taken)`,

		holder: `SELECT holder,
  (extract(epoch FROM expires_at - now()) * 1000000)::bigint,
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

		// A lease that already expired keeps its expiry: hold-for must not
		// bring it back after an operator released it. The notification goes
		// out with the commit, to standbys listening on the table's channel.
		release: `WITH released AS (
  UPDATE ` + table + ` SET
    expires_at = CASE WHEN expires_at <= now() THEN expires_at
      ELSE greatest(now(), acquired_at + $4::bigint * interval '1 microsecond') END,
    released_at = now(),
    last_finished_at = now(),
    last_exit_code = $5::integer
  WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint
  RETURNING job_name, expires_at <= now() AS free)
SELECT CASE WHEN free THEN pg_notify($6::text, job_name)::text END FROM released`,

		// An operator's release of a live lease. With $3 (force) the lease is
		// free at once, for a holder known to be dead; without, it is only
		// marked: the holder's next renewal fails, it stops its command and
		// its own release frees the lease, so two commands never overlap.
		releaseAny: `WITH released AS (
  UPDATE ` + table + ` SET released_at = now(),
    expires_at = CASE WHEN $3::boolean THEN now() ELSE expires_at END
  WHERE job_name = $1::text AND ($2::text IS NULL OR holder = $2::text) AND expires_at > now()
    AND (released_at IS NULL OR $3::boolean)
  RETURNING job_name, holder, fencing_token)
SELECT holder, fencing_token, CASE WHEN $3::boolean THEN pg_notify($4::text, job_name)::text END FROM released`,

		status: `SELECT job_name, holder, fencing_token,
  (extract(epoch FROM expires_at - now()) * 1000000)::bigint,
  released_at IS NOT NULL,
  last_started_at, last_finished_at, last_exit_code, last_holder
FROM ` + table + ` WHERE $1::text IS NULL OR job_name = $1::text
ORDER BY job_name`,
	}
}
