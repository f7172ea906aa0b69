WITH old AS (
  SELECT fencing_token, holder, expires_at, acquired_at, renewed_at, last_started_at, last_finished_at FROM "leader_lease" WHERE job_name = @job::text),
taken AS (
INSERT INTO "leader_lease" AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder)
SELECT @job::text, @holder::text, now() + @ttl::bigint * interval '1 microsecond', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now(), now(), now(), @holder::text
ON CONFLICT (job_name) DO UPDATE SET
  job_name = excluded.job_name,
  holder = excluded.holder,
  expires_at = excluded.expires_at,
  fencing_token = greatest(l.fencing_token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
  acquired_at = now(),
  renewed_at = now(),
  last_started_at = now(),
  last_finished_at = NULL,
  last_exit_code = NULL,
  last_holder = excluded.holder,
  released_at = NULL,
  released_by = NULL,
  last_scheduled_at = NULL
WHERE l.expires_at <= now() AND coalesce(l.slots, 1) = 1 AND NOT coalesce(l.paused_until > now(), false)
  AND l.fencing_token = (SELECT fencing_token FROM old)
  AND l.last_finished_at IS NOT DISTINCT FROM (SELECT last_finished_at FROM old)
RETURNING fencing_token),
lost AS (
  INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome)
  SELECT @job::text, 1, o.holder, o.fencing_token,
    1 + (SELECT count(*) FROM "leader_lease_history" h WHERE h.job_name = @job::text AND h.fencing_token = o.fencing_token),
    coalesce(o.last_started_at, o.acquired_at), greatest(o.expires_at, o.last_started_at, o.acquired_at),
    CASE WHEN o.last_started_at IS NULL THEN 'could_not_start' ELSE 'lost' END
  FROM old o WHERE EXISTS (SELECT FROM taken)
    AND (o.last_started_at IS NOT NULL AND o.last_finished_at IS NULL OR (o.renewed_at IS NULL AND o.last_started_at IS NULL AND o.last_finished_at IS NULL
    AND o.acquired_at IS NOT NULL)))
SELECT true AS taken, fencing_token AS token, NULL::text AS holder, NULL::bigint AS expires_in_micros, NULL::text AS state, 1 AS slots,
  false AS paused, NULL::timestamptz AS paused_until, NULL::timestamptz AS paused_at,
  NULL::text AS paused_by, NULL::text AS pause_reason, now() AS now
FROM taken
UNION ALL
SELECT false, fencing_token, holder, (extract(epoch FROM expires_at - now()) * 1000000)::bigint, CASE WHEN released_at IS NULL THEN 'held'
  WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END, coalesce(slots, 1),
  coalesce(l.paused_until > now(), false) AS paused,
  CASE WHEN l.paused_until < 'infinity' THEN l.paused_until END AS paused_until,
  l.paused_at, l.paused_by, l.pause_reason, now() AS now
FROM "leader_lease" AS l WHERE job_name = @job::text AND NOT EXISTS (SELECT FROM taken)