DELETE FROM "leader_lease_schedule"
WHERE job_name = @job::text AND scheduled_at = @at::timestamptz AND outcome = 'requested' AND holder = @holder::text