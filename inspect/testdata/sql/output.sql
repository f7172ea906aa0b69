SELECT fencing_token, attempt, output FROM "leader_lease_history"
WHERE job_name = @job::text AND output IS NOT NULL
  AND (@token::bigint IS NULL OR fencing_token = @token::bigint) AND (@attempt::integer IS NULL OR attempt = @attempt::integer)
ORDER BY finished_at DESC, fencing_token DESC, attempt DESC LIMIT 1