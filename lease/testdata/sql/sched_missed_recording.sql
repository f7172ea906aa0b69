WITH locked AS (
  SELECT greatest(accounted_through, (SELECT max(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = @job::text
  AND outcome NOT IN ('requested', 'manual'))) AS mark, CASE WHEN paused_until > now() THEN paused_at END AS paused_at,
    coalesce(paused_by, '') AS paused_by
  FROM "leader_lease" WHERE job_name = @job::text FOR UPDATE),
times AS (
  SELECT t.at, t.first FROM unnest(@ats::timestamptz[], @firsts::timestamptz[]) AS t(at, first)),
todo AS (
  SELECT t.at, t.first, p.outcome, CASE WHEN p.outcome = 'paused' THEN r.paused_by ELSE @holder::text END AS holder
  FROM times t, locked r,
    LATERAL (SELECT CASE WHEN @outcome::text = 'missed' AND t.at >= r.paused_at THEN 'paused' ELSE @outcome::text END AS outcome) p
  WHERE t.at <= now() AND t.at > coalesce(r.mark, '-infinity')
    AND NOT EXISTS (SELECT FROM times s WHERE s.first <= coalesce(r.mark, '-infinity') AND s.at > coalesce(r.mark, '-infinity'))),
m AS (
  INSERT INTO "leader_lease_schedule" (job_name, scheduled_at, first_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, at, first, outcome, holder, 0, now() FROM todo
  ORDER BY at
  ON CONFLICT DO NOTHING
  RETURNING scheduled_at, first_at, outcome, holder),
moved AS (
  UPDATE "leader_lease" SET accounted_through = greatest(accounted_through, (SELECT max(at) FROM todo))
  WHERE job_name = @job::text AND EXISTS (SELECT FROM todo)),
run AS (
  INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome, scheduled_at)
  SELECT @job::text, 1, holder, 0, 1, coalesce(first_at, scheduled_at), scheduled_at, outcome, scheduled_at
  FROM m)
SELECT (SELECT count(*) FROM m) AS recorded, now() AS now, greatest((SELECT max(at) FROM todo), (SELECT mark FROM locked)) AS latest,
  EXISTS (SELECT FROM locked) AS has_row