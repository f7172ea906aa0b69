WITH released AS (
  UPDATE "leader_lease" SET released_at = now(), released_by = @by::text,
    expires_at = CASE WHEN @force::boolean THEN now() ELSE expires_at END
  WHERE job_name = @row::text AND (@holder::text IS NULL OR holder = @holder::text) AND expires_at > now()
    AND (released_at IS NULL OR @force::boolean) AND (@token::bigint IS NULL OR fencing_token = @token::bigint)
  RETURNING job_name, slot, holder, fencing_token)
SELECT holder, fencing_token AS token,
  pg_notify(CASE WHEN slot > 1 THEN @slot_channel::text ELSE @row_channel::text END, 'stop' || E'\n' || fencing_token || E'\n' || job_name)::text
  || CASE WHEN @force::boolean
  THEN pg_notify(CASE WHEN slot > 1 THEN @slot_channel::text ELSE @row_channel::text END, CASE WHEN slot > 1 THEN left(job_name, length(job_name) - length('#' || slot)) ELSE job_name END)::text
    || pg_notify(@table_channel::text, CASE WHEN slot > 1 THEN left(job_name, length(job_name) - length('#' || slot)) ELSE job_name END)::text ELSE '' END AS notified
FROM released