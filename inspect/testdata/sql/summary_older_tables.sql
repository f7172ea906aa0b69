WITH rows AS (
  SELECT CASE WHEN slot > 1 THEN left(job_name, length(job_name) - length('#' || slot)) ELSE job_name END AS job, holder, expires_at, expires_at > now() AS live, coalesce(slots, 1) AS slots, coalesce(slot, 1) AS slot,
    schedule, NULL::timestamptz AS scheduled_since
  FROM "leader_lease"),
jobs AS (
  SELECT job, max(slots) FILTER (WHERE slot = 1) AS slots, max(schedule) FILTER (WHERE slot = 1) AS schedule,
    max(scheduled_since) FILTER (WHERE slot = 1) AS scheduled_since, count(*) FILTER (WHERE live) AS held,
    max(expires_at) AS last_expiry,
    coalesce(array_agg(DISTINCT holder ORDER BY holder) FILTER (WHERE live), '{}') AS holders
  FROM rows WHERE @job::text IS NULL OR job = @job::text GROUP BY job),
win AS (
  SELECT job_name, outcome, started_at, finished_at FROM "leader_lease_history"
  WHERE finished_at >= now() - @window::bigint * interval '1 microsecond'),
recent AS (
  SELECT job_name, array_agg(outcome ORDER BY outcome) AS outcomes, array_agg(n ORDER BY outcome) AS counts
  FROM (SELECT job_name, outcome, count(*)::integer AS n FROM win GROUP BY job_name, outcome) c
  GROUP BY job_name),
spans AS (
  SELECT job_name, array_agg(outcome) AS outcomes, array_agg(started_at) AS firsts, array_agg(finished_at) AS lasts
  FROM win WHERE outcome IN ('missed', 'skipped', 'paused') AND started_at < finished_at GROUP BY job_name)
SELECT j.job, coalesce(j.slots, 1) AS slots, j.held AS slots_held, j.holders, now() - @window::bigint * interval '1 microsecond' AS since,
  lr.*, ls.finished_at AS last_success, ls.holder AS last_success_by, coalesce(r.outcomes, '{}') AS outcomes, coalesce(r.counts, '{}') AS counts,
  coalesce(sp.outcomes, '{}') AS span_outcomes, coalesce(sp.firsts, '{}') AS span_firsts, coalesce(sp.lasts, '{}') AS span_lasts,
  coalesce(j.schedule, '') AS schedule, j.scheduled_since, now() AS now, j.last_expiry,
  lc.holder AS counted_holder, lc.finished_at AS counted_finished_at, lc.exit_code AS counted_exit_code, lc.outcome AS counted_outcome,
  coalesce(pg_catalog.has_table_privilege(pg_catalog.to_regclass(@claims::text), 'SELECT'), false) AS claims,
  p.*
FROM jobs j
LEFT JOIN LATERAL (SELECT CASE WHEN paused_until > now() THEN coalesce(paused_by, '') END AS paused_by,
  coalesce(pause_reason, '') AS pause_reason, paused_at, CASE WHEN paused_until < 'infinity' THEN paused_until END AS paused_until,
  CASE WHEN j.held = 0 THEN (SELECT coalesce(jsonb_agg(jsonb_build_object('holder', e.holder, 'priority', e.priority,
    'pinned', e.pinned IS TRUE, 'listening', e.pid IS NOT NULL, 'since', e.since) ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id), '[]'::jsonb)
  FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started))) END AS queue
  FROM "leader_lease" l WHERE job_name = j.job) p ON true
LEFT JOIN LATERAL (
  SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome, NULL::text AS stopped_by FROM "leader_lease_history" h
  WHERE h.job_name >= j.job AND h.job_name <= j.job
    AND h.outcome NOT IN ('missed', 'skipped', 'paused')
  ORDER BY h.job_name DESC, h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT 1) lr ON true
LEFT JOIN LATERAL (
  SELECT holder, finished_at, exit_code, outcome FROM "leader_lease_history" h
  WHERE h.job_name >= j.job AND h.job_name <= j.job AND outcome NOT IN ('missed', 'skipped', 'paused') AND outcome <> 'stopped'
  ORDER BY h.job_name DESC, h.finished_at DESC, h.started_at DESC, h.fencing_token DESC LIMIT 1) lc ON true
LEFT JOIN LATERAL (
  SELECT finished_at, holder FROM "leader_lease_history" h
  WHERE h.job_name >= j.job AND h.job_name <= j.job AND h.outcome = 'exited' AND h.exit_code = 0
  ORDER BY h.job_name DESC, h.finished_at DESC LIMIT 1) ls ON true
LEFT JOIN recent r ON r.job_name = j.job
LEFT JOIN spans sp ON sp.job_name = j.job
ORDER BY j.job