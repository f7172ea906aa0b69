WITH was AS (
  SELECT schedule FROM "leader_lease" WHERE job_name = @job::text FOR UPDATE),
switched AS (
  UPDATE "leader_lease" AS l SET schedule = @spec::text, schedule_zone = NULL,
    accounted_through = CASE WHEN schedule IS DISTINCT FROM @spec::text
      THEN greatest(accounted_through, (SELECT max(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = @job::text
  AND outcome NOT IN ('requested', 'manual')), now()) ELSE accounted_through END,
    scheduled_since = CASE WHEN l.schedule IS DISTINCT FROM @spec::text THEN now() ELSE l.scheduled_since END
  WHERE job_name = @job::text)
SELECT schedule FROM was