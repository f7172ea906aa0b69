SELECT last_scheduled_at IS NOT DISTINCT FROM @at::timestamptz AS taken, holder, (extract(epoch FROM expires_at - now()) * 1000000)::bigint AS expires_in_micros, CASE WHEN released_at IS NULL THEN 'held'
  WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END AS state, coalesce(paused_until > now(), false) AS paused,
  coalesce(paused_by, '') AS paused_by
FROM "leader_lease" WHERE job_name = @job::text