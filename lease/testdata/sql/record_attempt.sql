WITH ended AS (
  UPDATE "leader_lease" AS l SET last_started_at = NULL, last_exit_code = @exit_code::integer
  FROM (SELECT last_started_at FROM "leader_lease" WHERE job_name = @row::text) AS o
  WHERE l.job_name = @row::text AND l.holder = @holder::text AND l.fencing_token = @token::bigint
  RETURNING l.holder, l.fencing_token, o.last_started_at AS started)
INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome,
  output, scheduled_at, stopped_by)
SELECT @job::text, @slot::integer, holder, fencing_token, @attempt::integer, coalesce(started, now()), now(), @exit_code::integer, @outcome::text,
  @output::bytea, @scheduled_at::timestamptz, @stopped_by::text
FROM ended