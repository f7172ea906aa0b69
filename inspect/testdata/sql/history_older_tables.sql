SELECT h.job_name AS job, h.slot, h.holder, h.fencing_token, h.attempt, h.started_at, h.finished_at, h.exit_code, h.outcome,
  NULL::timestamptz AS scheduled_at, coalesce(NULL::integer, 0) AS output_bytes, coalesce(NULL::text, '') AS stopped_by
FROM "leader_lease_history" h WHERE (@job::text IS NULL OR h.job_name = @job::text) AND (@since::timestamptz IS NULL OR h.finished_at >= @since::timestamptz)
ORDER BY h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT @limit::integer