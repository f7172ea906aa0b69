WITH was AS (
  SELECT paused_at, paused_until, paused_by, pause_reason FROM "leader_lease"
  WHERE job_name = @job::text AND paused_until > now() FOR UPDATE),
resumed AS (
  UPDATE "leader_lease" SET paused_until = now()
  WHERE job_name = @job::text AND paused_until > now())
SELECT paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until,
  coalesce(paused_by, '') AS paused_by, coalesce(pause_reason, '') AS pause_reason, pg_notify(@job_channel::text, @job::text)::text AS notified
FROM was