CREATE OR REPLACE FUNCTION "leader_lease_look_f6eaa774"(text,text,text,bigint,bigint)
RETURNS TABLE (holder text, token bigint, expires_at timestamptz, released_at timestamptz, last_finished_at timestamptz,
  paused boolean, paused_until timestamptz, paused_at timestamptz, paused_by text, pause_reason text, now timestamptz,
  ahead bigint, turn_left_micros bigint, until_micros bigint, queued boolean, handed boolean, "full" boolean,
  slot integer, slot_holder text, slot_token bigint, slot_expires_at timestamptz) LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY SELECT holder, l.fencing_token AS token, l.expires_at, l.released_at, l.last_finished_at,
    coalesce(l.paused_until > now(), false) AS paused,
  CASE WHEN l.paused_until < 'infinity' THEN l.paused_until END AS paused_until,
  l.paused_at, l.paused_by, l.pause_reason, now() AS now,
    a.ahead, NULL::bigint AS turn_left_micros, a.until_micros,
    coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', $3::text)), false) AS queued,
    coalesce(l.holder = $2::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AS handed,
    true AS full, NULL::integer AS slot, NULL::text AS slot_holder, NULL::bigint AS slot_token, NULL::timestamptz AS slot_expires_at
  FROM "leader_lease" AS l, LATERAL (
    SELECT count(*) FILTER (WHERE NOT q.passed) AS ahead, max(q.until) FILTER (WHERE q.id = $3::text) - (extract(epoch FROM now()) * 1000000)::bigint AS until_micros
    FROM (SELECT e.id, e.until, bool_or(e.id = $3::text) OVER (ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id) AS passed
      FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(id text, priority integer, since bigint, pinned boolean, until bigint)) AS q) AS a
  WHERE l.job_name = $1::text AND l.expires_at > now();
  IF NOT FOUND THEN
    RETURN QUERY SELECT holder, l.fencing_token AS token, l.expires_at, l.released_at, l.last_finished_at,
  coalesce(l.paused_until > now(), false) AS paused,
  CASE WHEN l.paused_until < 'infinity' THEN l.paused_until END AS paused_until,
  l.paused_at, l.paused_by, l.pause_reason, now() AS now,
  a.ahead, a.turn_left_micros,
  (SELECT e.until - (extract(epoch FROM now()) * 1000000)::bigint FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE e.id = $3::text) AS until_micros,
  coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', $3::text)), false) AS queued,
  coalesce(l.holder = $2::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AS handed,
  l.expires_at > now() AS full, NULL::integer AS slot, NULL::text AS slot_holder, NULL::bigint AS slot_token, NULL::timestamptz AS slot_expires_at
FROM "leader_lease" AS l, LATERAL (
  SELECT count(*) FILTER (WHERE NOT q.passed) AS ahead,
    (extract(epoch FROM min(q.turn_end) FILTER (WHERE NOT q.passed AND isfinite(q.turn_end)) - now()) * 1000000)::bigint AS turn_left_micros
  FROM (SELECT bool_or(e.id = $3::text) OVER (ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id) AS passed, CASE WHEN l.released_at IS NULL AND NOT (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND coalesce(l.paused_until < l.expires_at, true)
      THEN l.expires_at + $5::bigint * interval '1 microsecond'
      ELSE greatest(l.expires_at, l.paused_until) + ($4::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END AS turn_end
    FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint)
    WHERE e.id = $3::text OR l.expires_at > now() OR (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started)) AND now() < CASE WHEN l.released_at IS NULL AND NOT (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND coalesce(l.paused_until < l.expires_at, true)
      THEN l.expires_at + $5::bigint * interval '1 microsecond'
      ELSE greatest(l.expires_at, l.paused_until) + ($4::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END) AS q) AS a
WHERE l.job_name = $1::text;
  END IF;
END
$fn$