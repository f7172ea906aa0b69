DELETE FROM "leader_lease_schedule" WHERE ctid = ANY (ARRAY(SELECT ctid FROM "leader_lease_schedule"
  WHERE job_name = @job::text AND scheduled_at < now() - @keep::bigint * interval '1 microsecond'
    AND scheduled_at < (SELECT max(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = @job::text
  AND outcome NOT IN ('requested', 'manual'))
  ORDER BY job_name, scheduled_at LIMIT 1000))