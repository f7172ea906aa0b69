SELECT schedule, now() AS now, greatest(accounted_through, (SELECT max(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = @job::text
  AND outcome NOT IN ('requested', 'manual'))) AS latest
FROM "leader_lease" WHERE job_name = @job::text