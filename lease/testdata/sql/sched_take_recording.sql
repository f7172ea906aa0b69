WITH old AS (
  SELECT fencing_token, holder, expires_at, acquired_at, renewed_at, last_started_at, last_finished_at, last_scheduled_at, schedule, slots,
    accounted_through
  FROM "leader_lease" WHERE job_name = @job::text),
mark AS (
  SELECT greatest((SELECT accounted_through FROM old), (SELECT max(scheduled_at) FROM "leader_lease_schedule" WHERE job_name = @job::text
  AND outcome NOT IN ('requested', 'manual'))) AS at),
claimed AS (
  SELECT outcome, holder FROM "leader_lease_schedule" WHERE job_name = @job::text AND scheduled_at = @at::timestamptz
  UNION ALL
  SELECT 'claimed', NULL FROM mark WHERE @at::timestamptz <= mark.at
  LIMIT 1),
due AS (
  SELECT WHERE @at::timestamptz <= now() AND NOT EXISTS (SELECT FROM claimed)
    AND coalesce((SELECT schedule FROM old), @spec::text) = @spec::text AND coalesce((SELECT slots FROM old), 1) = 1),
taken AS (
INSERT INTO "leader_lease" AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder, schedule, last_scheduled_at, accounted_through, scheduled_since)
SELECT @job::text, @holder::text, now() + @ttl::bigint * interval '1 microsecond', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now(), now(), now(), @holder::text, @spec::text, @at::timestamptz, @at::timestamptz, now()
FROM due
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
  schedule = excluded.schedule,
  last_scheduled_at = excluded.last_scheduled_at,
  accounted_through = excluded.accounted_through,
  scheduled_since = CASE WHEN l.schedule IS DISTINCT FROM @spec::text THEN now() ELSE l.scheduled_since END
WHERE l.expires_at <= now() AND coalesce(l.slots, 1) = 1 AND coalesce(l.schedule, @spec::text) = @spec::text
  AND @at::timestamptz > coalesce(l.accounted_through, '-infinity') AND NOT coalesce(l.paused_until > now(), false)
  AND l.fencing_token = (SELECT fencing_token FROM old)
  AND l.last_finished_at IS NOT DISTINCT FROM (SELECT last_finished_at FROM old)
RETURNING fencing_token),
claim AS (
  INSERT INTO "leader_lease_schedule" (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, @at::timestamptz, 'run', @holder::text, fencing_token, now() FROM taken
  RETURNING 1),
held AS (
  SELECT holder, fencing_token, expires_at, accounted_through, coalesce(paused_until > now(), false) AS paused, paused_by
  FROM "leader_lease"
  WHERE job_name = @job::text AND EXISTS (SELECT FROM due) AND NOT EXISTS (SELECT FROM taken)
  FOR UPDATE),
skipped AS (
  INSERT INTO "leader_lease_schedule" (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, @at::timestamptz, CASE WHEN h.paused THEN 'paused' ELSE 'skipped' END,
    CASE WHEN h.paused THEN coalesce(h.paused_by, '') ELSE h.holder END, h.fencing_token, now()
  FROM held h WHERE (h.paused OR @skip_held::boolean AND h.expires_at > now()) AND @at::timestamptz > coalesce(h.accounted_through, '-infinity')
  ON CONFLICT DO NOTHING
  RETURNING outcome, holder),
skippedMark AS (
  UPDATE "leader_lease" SET accounted_through = @at::timestamptz
  WHERE job_name = @job::text AND EXISTS (SELECT FROM skipped)),
lost AS (
  INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome, scheduled_at)
  SELECT @job::text, 1, o.holder, o.fencing_token,
    1 + (SELECT count(*) FROM "leader_lease_history" h WHERE h.job_name = @job::text AND h.fencing_token = o.fencing_token),
    coalesce(o.last_started_at, o.acquired_at), greatest(o.expires_at, o.last_started_at, o.acquired_at),
    CASE WHEN o.last_started_at IS NULL THEN 'could_not_start' ELSE 'lost' END,
    CASE WHEN NOT EXISTS (SELECT FROM "leader_lease_schedule" c WHERE c.job_name = @job::text
      AND c.scheduled_at = o.last_scheduled_at AND c.fencing_token <> o.fencing_token) THEN o.last_scheduled_at END
  FROM old o WHERE EXISTS (SELECT FROM taken)
    AND (o.last_started_at IS NOT NULL AND o.last_finished_at IS NULL OR (o.renewed_at IS NULL AND o.last_started_at IS NULL AND o.last_finished_at IS NULL
    AND o.acquired_at IS NOT NULL))),
skippedRun AS (
  INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome, scheduled_at)
  SELECT @job::text, 1, holder, 0, 1, @at::timestamptz, @at::timestamptz, outcome, @at::timestamptz
  FROM skipped)
SELECT EXISTS (SELECT FROM taken) AND EXISTS (SELECT FROM claim) AS taken,
  coalesce((SELECT fencing_token FROM taken), l.fencing_token, 0) AS token,
  l.holder, (extract(epoch FROM expires_at - now()) * 1000000)::bigint AS expires_in_micros, CASE WHEN released_at IS NULL THEN 'held'
  WHEN expires_at <= released_at THEN 'released'
  WHEN last_finished_at IS NOT NULL THEN 'kept' ELSE 'releasing' END AS state, coalesce(l.slots, 1) AS slots, l.schedule,
  coalesce((SELECT outcome FROM claimed), (SELECT outcome FROM skipped)) AS claim,
  coalesce((SELECT holder FROM claimed), (SELECT holder FROM skipped)) AS claimed_by,
  now() AS now, (SELECT at FROM mark) AS latest
FROM (VALUES (1)) AS one LEFT JOIN "leader_lease" AS l ON l.job_name = @job::text