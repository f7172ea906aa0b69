SELECT now() AS now, c.outcome AS claim, c.holder AS claim_by, r.*
FROM (VALUES (1)) AS one
LEFT JOIN "leader_lease_schedule" c ON c.job_name = @job::text AND c.scheduled_at = @scheduled_at::timestamptz
LEFT JOIN LATERAL (SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome FROM "leader_lease_history" WHERE job_name = @job::text AND finished_at >= @scheduled_at::timestamptz
  AND scheduled_at = @scheduled_at::timestamptz ORDER BY finished_at DESC LIMIT 1) r ON true