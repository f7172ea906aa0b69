SELECT d.n, c.outcome AS claim, c.claimed_at, l.schedule
FROM unnest(@jobs::text[], @times::timestamptz[]) WITH ORDINALITY AS d(job, at, n)
LEFT JOIN "leader_lease_schedule" c ON c.job_name = d.job AND c.scheduled_at = d.at
LEFT JOIN "leader_lease" l ON l.job_name = d.job