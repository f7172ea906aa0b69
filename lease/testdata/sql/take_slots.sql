WITH want AS (
  SELECT g AS slot, CASE WHEN g = 1 THEN @job::text ELSE @job::text || '#' || g END AS name FROM generate_series(1, @slots::integer) AS g),
cur AS (
  SELECT w.slot, w.name, l.job_name IS NOT NULL AS present,
    l.job_name IS NOT NULL AND coalesce(l.slot, 1) <> w.slot AS foreign_row,
    l.fencing_token, l.holder, l.expires_at, l.acquired_at, l.renewed_at, l.released_at, l.last_started_at, l.last_finished_at,
    CASE WHEN w.slot = 1 AND l.job_name IS NOT NULL THEN coalesce(l.slots, 1) END AS recorded
  FROM want w LEFT JOIN "leader_lease" AS l ON l.job_name = w.name),
verdict AS (
  SELECT (SELECT recorded FROM cur WHERE slot = 1) AS recorded,
    (SELECT NOT present OR expires_at <= now() FROM cur WHERE slot = 1) AS first_free,
    (SELECT min(name) FROM cur WHERE foreign_row) AS foreign_name),
pause AS (
  SELECT coalesce(p.paused_until > now(), false) AS paused,
  CASE WHEN p.paused_until < 'infinity' THEN p.paused_until END AS paused_until,
  p.paused_at, p.paused_by, p.pause_reason, now() AS now
  FROM (VALUES (1)) AS one LEFT JOIN "leader_lease" AS p ON p.job_name = @job::text),
pick AS (
  SELECT c.* FROM cur c, verdict v, pause z
  WHERE (NOT c.present OR c.expires_at <= now()) AND v.foreign_name IS NULL
    AND (coalesce(v.recorded, @slots) = @slots OR v.recorded = 1 AND v.first_free)
    AND NOT z.paused
  ORDER BY c.slot LIMIT 1),
taken AS (
INSERT INTO "leader_lease" AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder, slot, slots)
SELECT name, @holder::text, now() + @ttl::bigint * interval '1 microsecond', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now(), now(), now(), @holder::text, slot, @slots
FROM pick
ON CONFLICT (job_name) DO UPDATE SET
  job_name = excluded.job_name,
  holder = excluded.holder,
  expires_at = excluded.expires_at,
  fencing_token = greatest(l.fencing_token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
  acquired_at = now(),
  renewed_at = now(),
  last_started_at = now(),
  last_finished_at = NULL,
  last_exit_code = NULL,
  last_holder = excluded.holder,
  released_at = NULL,
  released_by = NULL,
  slot = excluded.slot,
  slots = excluded.slots,
  last_scheduled_at = NULL
WHERE l.expires_at <= now() AND NOT EXISTS (SELECT FROM "leader_lease" p WHERE p.job_name = @job::text AND p.paused_until > now())
  AND l.fencing_token = (SELECT fencing_token FROM pick)
  AND l.last_finished_at IS NOT DISTINCT FROM (SELECT last_finished_at FROM pick)
RETURNING fencing_token, slot)
SELECT true AS taken, t.fencing_token AS token, t.slot, NULL::text AS holder, NULL::bigint AS expires_in_micros,
  NULL::text AS state, NULL::integer AS recorded, NULL::text AS foreign_name, false AS racing, false AS paused, NULL::timestamptz AS paused_until, NULL::timestamptz AS paused_at,
  NULL::text AS paused_by, NULL::text AS pause_reason, now() AS now
FROM taken t
UNION ALL
(SELECT false, coalesce(c.fencing_token, 0), c.slot, c.holder, (extract(epoch FROM expires_at - now()) * 1000000)::bigint, CASE WHEN released_at IS NULL THEN 'held'
  WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END,
  v.recorded, v.foreign_name, EXISTS (SELECT FROM pick), z.*
FROM cur c, verdict v, pause z WHERE NOT EXISTS (SELECT FROM taken)
ORDER BY (c.present AND c.expires_at > now()) DESC, c.expires_at LIMIT 1)