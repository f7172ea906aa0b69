SELECT holder, fencing_token AS token, expires_at, released_at, last_finished_at,
  coalesce(l.paused_until > now(), false) AS paused,
  CASE WHEN l.paused_until < 'infinity' THEN l.paused_until END AS paused_until,
  l.paused_at, l.paused_by, l.pause_reason, now() AS now
FROM "leader_lease" AS l WHERE job_name = @job::text