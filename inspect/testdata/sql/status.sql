SELECT CASE WHEN slot > 1 THEN left(job_name, length(job_name) - length('#' || slot)) ELSE job_name END AS job, holder, fencing_token,
  (extract(epoch FROM expires_at - now()) * 1000000)::bigint AS expires_in_micros,
  CASE WHEN expires_at > now() THEN CASE WHEN released_at IS NULL THEN 'held'
  WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END WHEN released_at IS NOT NULL THEN 'released'
  ELSE 'expired' END AS state,
  last_started_at, last_finished_at, last_exit_code, last_holder, coalesce(slot, 1) AS slot, coalesce(slots, 1) AS slots, schedule,
  CASE WHEN paused_until > now() THEN coalesce(paused_by, '') END AS paused_by,
  coalesce(pause_reason, '') AS pause_reason, paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until,
  (SELECT coalesce(jsonb_agg(jsonb_build_object('holder', e.holder, 'priority', e.priority,
    'pinned', e.pinned IS TRUE, 'listening', e.pid IS NOT NULL, 'since', e.since) ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id), '[]'::jsonb)
  FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started))) AS queue
FROM "leader_lease" l WHERE @job::text IS NULL OR job_name = @job::text OR (slot > 1 AND job_name = @job::text || '#' || slot)
ORDER BY job, coalesce(slot, 1)