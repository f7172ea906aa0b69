INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome,
  output, scheduled_at, stopped_by)
SELECT @job::text, @slot::integer, @holder::text, @token::bigint, @attempt::integer, now() - (@ran::bigint + @ended_ago::bigint) * interval '1 microsecond',
  now() - @ended_ago::bigint * interval '1 microsecond', @exit_code::integer, @outcome::text,
  @output::bytea, @scheduled_at::timestamptz, @stopped_by::text
WHERE NOT EXISTS (SELECT FROM "leader_lease_history" WHERE job_name = @job::text AND fencing_token = @token::bigint AND attempt >= @attempt::integer)