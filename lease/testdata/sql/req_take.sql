WITH old AS (
  SELECT fencing_token, holder, expires_at, acquired_at, renewed_at, last_started_at, last_finished_at, last_scheduled_at, schedule, slots, paused_until
  FROM "leader_lease" WHERE job_name = @job::text),
req AS (
  SELECT scheduled_at FROM "leader_lease_schedule" WHERE job_name = @job::text AND outcome = 'requested'
  ORDER BY scheduled_at LIMIT 1 FOR UPDATE),
free AS (
  SELECT r.scheduled_at FROM req r, old o
  WHERE o.expires_at <= now() AND coalesce(o.schedule, @spec::text) = @spec::text AND coalesce(o.slots, 1) = 1
    AND NOT coalesce(o.paused_until > now(), false)),
taken AS (
INSERT INTO "leader_lease" AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder, schedule, last_scheduled_at, scheduled_since)
SELECT @job::text, @holder::text, now() + @ttl::bigint * interval '1 microsecond', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now(), now(), now(), @holder::text, @spec::text, scheduled_at, now()
FROM free
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
  schedule = excluded.schedule,
  last_scheduled_at = excluded.last_scheduled_at,
  scheduled_since = CASE WHEN l.schedule IS DISTINCT FROM @spec::text THEN now() ELSE l.scheduled_since END
WHERE l.expires_at <= now() AND coalesce(l.slots, 1) = 1 AND coalesce(l.schedule, @spec::text) = @spec::text
  AND l.fencing_token = (SELECT fencing_token FROM old)
  AND l.last_finished_at IS NOT DISTINCT FROM (SELECT last_finished_at FROM old)
RETURNING fencing_token),
claim AS (
  UPDATE "leader_lease_schedule" c SET outcome = 'manual', holder = @holder::text, fencing_token = t.fencing_token, claimed_at = now()
  FROM taken t, free f
  WHERE c.job_name = @job::text AND c.scheduled_at = f.scheduled_at AND c.outcome = 'requested'
  RETURNING 1)
SELECT EXISTS (SELECT FROM taken) AND EXISTS (SELECT FROM claim) AS taken, coalesce((SELECT fencing_token FROM taken), 0) AS token,
  (SELECT scheduled_at FROM req) AS at, l.holder, (extract(epoch FROM expires_at - now()) * 1000000)::bigint AS expires_in_micros, CASE WHEN released_at IS NULL THEN 'held'
  WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END AS state, now() AS now
FROM (VALUES (1)) AS one LEFT JOIN "leader_lease" AS l ON l.job_name = @job::text