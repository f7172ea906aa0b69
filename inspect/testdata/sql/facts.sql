SELECT d.n, dc.outcome AS claim, dc.holder AS claim_by,
  (SELECT min(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = d.job) AS first_claim,
  r.*, lh.scheduled_at AS last_scheduled_at, lc.outcome AS last_claim, lc.claimed_at AS last_claimed_at
FROM unnest(@jobs::text[], @dues::timestamptz[], @finished::timestamptz[], @tokens::bigint[], @attempts::integer[]) WITH ORDINALITY
  AS d(job, due, finished, token, attempt, n)
LEFT JOIN "leader_lease_schedule" dc ON dc.job_name = d.job AND dc.scheduled_at = d.due
LEFT JOIN LATERAL (SELECT slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome FROM "leader_lease_history" WHERE d.due IS NOT NULL AND job_name = d.job AND finished_at >= d.due
  AND scheduled_at = d.due ORDER BY finished_at DESC LIMIT 1) r ON true
LEFT JOIN LATERAL (SELECT scheduled_at FROM "leader_lease_history" WHERE d.finished IS NOT NULL AND job_name = d.job
  AND finished_at = d.finished AND fencing_token = d.token AND attempt = d.attempt LIMIT 1) lh ON true
LEFT JOIN "leader_lease_schedule" lc ON lc.job_name = d.job AND lc.scheduled_at = lh.scheduled_at