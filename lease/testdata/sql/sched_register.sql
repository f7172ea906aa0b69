WITH reg AS (
  INSERT INTO "leader_lease" AS l (job_name, holder, expires_at, fencing_token, released_at, schedule, schedule_zone, scheduled_since)
  VALUES (@job::text, @holder::text, now(), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now(), @spec::text, @zone::text, now())
  ON CONFLICT (job_name) DO UPDATE SET schedule = excluded.schedule,
    schedule_zone = CASE WHEN l.schedule IS NULL THEN excluded.schedule_zone ELSE coalesce(l.schedule_zone, excluded.schedule_zone) END,
    scheduled_since = CASE WHEN l.schedule IS DISTINCT FROM @spec::text THEN now() ELSE l.scheduled_since END
  WHERE l.schedule IS NULL OR l.schedule = excluded.schedule AND l.schedule_zone IS NULL AND excluded.schedule_zone IS NOT NULL
  RETURNING schedule, schedule_zone),
cur AS (
  SELECT schedule, schedule_zone, accounted_through FROM "leader_lease" WHERE job_name = @job::text)
SELECT coalesce((SELECT schedule FROM reg), (SELECT schedule FROM cur)) AS schedule,
  CASE WHEN EXISTS (SELECT FROM reg) THEN (SELECT schedule_zone FROM reg) ELSE (SELECT schedule_zone FROM cur) END AS zone,
  now() AS now, greatest((SELECT accounted_through FROM cur), (SELECT max(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = @job::text
  AND outcome NOT IN ('requested', 'manual'))) AS latest