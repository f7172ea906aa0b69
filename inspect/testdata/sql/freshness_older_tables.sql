SELECT now() AS now, 'success' AS kind, s.* FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome, NULL::text AS stopped_by FROM "leader_lease_history" h WHERE job_name = @job::text AND h.outcome = 'exited' AND h.exit_code = 0
  ORDER BY finished_at DESC LIMIT 1) s ON true
UNION ALL
SELECT now(), 'newest', r.* FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome, NULL::text AS stopped_by FROM "leader_lease_history" h WHERE job_name = @job::text
  AND outcome NOT IN ('missed', 'skipped', 'paused')
  ORDER BY finished_at DESC LIMIT 1) r ON true
UNION ALL
SELECT now(), 'counted', c.* FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome, NULL::text AS stopped_by FROM "leader_lease_history" h WHERE job_name = @job::text
  AND outcome NOT IN ('missed', 'skipped', 'paused') AND outcome <> 'stopped'
  ORDER BY finished_at DESC LIMIT 1) c ON true