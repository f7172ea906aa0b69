WITH job AS (
  SELECT schedule FROM "leader_lease" WHERE job_name = @job::text),
req AS (
  INSERT INTO "leader_lease_schedule" (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, now(), 'requested', @holder::text, 0, now() FROM job WHERE schedule IS NOT NULL)
SELECT EXISTS (SELECT FROM job) AS has_row, s.schedule, CASE WHEN s.schedule IS NOT NULL THEN now() END AS at,
  CASE WHEN s.schedule IS NOT NULL THEN pg_notify(@channel::text, @payload::text)::text END AS notified
FROM (SELECT (SELECT schedule FROM job) AS schedule) AS s