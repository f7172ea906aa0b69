SELECT holder, l.fencing_token AS token, l.expires_at, l.released_at, l.last_finished_at,
  coalesce(l.paused_until > now(), false) AS paused,
  CASE WHEN l.paused_until < 'infinity' THEN l.paused_until END AS paused_until,
  l.paused_at, l.paused_by, l.pause_reason, now() AS now,
  a.ahead, a.turn_left_micros,
  (SELECT e.until - (extract(epoch FROM now()) * 1000000)::bigint FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE e.id = @id::text) AS until_micros,
  coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false) AS queued,
  coalesce(l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AS handed,
  l.expires_at > now() AS full, NULL::integer AS slot, NULL::text AS slot_holder, NULL::bigint AS slot_token, NULL::timestamptz AS slot_expires_at
FROM "leader_lease" AS l, LATERAL (
  SELECT count(*) FILTER (WHERE NOT q.passed) AS ahead,
    (extract(epoch FROM min(q.turn_end) FILTER (WHERE NOT q.passed AND isfinite(q.turn_end)) - now()) * 1000000)::bigint AS turn_left_micros
  FROM (SELECT bool_or(e.id = @id::text) OVER (ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id) AS passed, CASE WHEN l.released_at IS NULL AND NOT (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND coalesce(l.paused_until < l.expires_at, true)
      THEN l.expires_at + @retry::bigint * interval '1 microsecond'
      ELSE greatest(l.expires_at, l.paused_until) + (@first::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END AS turn_end
    FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint)
    WHERE e.id = @id::text OR l.expires_at > now() OR (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started)) AND now() < CASE WHEN l.released_at IS NULL AND NOT (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND coalesce(l.paused_until < l.expires_at, true)
      THEN l.expires_at + @retry::bigint * interval '1 microsecond'
      ELSE greatest(l.expires_at, l.paused_until) + (@first::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END) AS q) AS a
WHERE l.job_name = @job::text