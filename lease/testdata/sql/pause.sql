WITH p AS (
  INSERT INTO "leader_lease" AS l (job_name, holder, expires_at, fencing_token, released_at, paused_until, paused_at, paused_by, pause_reason)
  VALUES (@job::text, @holder::text, now(), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now(), coalesce(@until::timestamptz, 'infinity'), now(), @holder::text, @reason::text)
  ON CONFLICT (job_name) DO UPDATE SET paused_until = excluded.paused_until, paused_at = excluded.paused_at,
    paused_by = excluded.paused_by, pause_reason = excluded.pause_reason
  RETURNING paused_at, paused_until, CASE WHEN expires_at > now() THEN holder END AS running)
SELECT paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until, running FROM p