SELECT holder, l.fencing_token AS token, l.expires_at, l.released_at, l.last_finished_at,
  coalesce(l.paused_until > now(), false) AS paused,
  CASE WHEN l.paused_until < 'infinity' THEN l.paused_until END AS paused_until,
  l.paused_at, l.paused_by, l.pause_reason, now() AS now,
  a.ahead, a.turn_left_micros,
  (SELECT e.until - (extract(epoch FROM now()) * 1000000)::bigint FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE e.id = @id::text) AS until_micros,
  EXISTS (SELECT FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text AND x->>'handed_until' IS NULL) AS queued,
  coalesce(l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) OR EXISTS (SELECT FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text
    AND (x->>'handed_until')::bigint > (extract(epoch FROM now()) * 1000000)::bigint) AS handed,
  f.full AS full, f.slot, f.slot_holder, f.slot_token, f.slot_expires_at
FROM "leader_lease" AS l, LATERAL (
  SELECT coalesce(s.live = @slots::integer, false) AS full,
    CASE WHEN s.rows = @slots::integer THEN s.expires_at ELSE '-infinity' END AS free_since,
    coalesce(s.rows = @slots::integer AND s.released_at IS NULL AND NOT (s.renewed_at IS NULL AND s.last_started_at IS NULL AND s.last_finished_at IS NULL
    AND s.acquired_at IS NOT NULL), false) AS unreleased,
    s.slot, s.holder AS slot_holder, s.fencing_token AS slot_token, s.expires_at AS slot_expires_at
  FROM (VALUES (1)) AS one LEFT JOIN (
    SELECT coalesce(r.slot, 1) AS slot, r.holder, r.fencing_token, r.expires_at,
      r.released_at, r.acquired_at, r.renewed_at, r.last_started_at, r.last_finished_at,
      count(*) FILTER (WHERE r.expires_at > now()) OVER () AS live, count(*) OVER () AS rows
    FROM "leader_lease" AS r WHERE r.job_name IN (SELECT CASE WHEN g = 1 THEN @job::text ELSE @job::text || '#' || g END FROM generate_series(1, @slots::integer) AS g)
    ORDER BY r.expires_at LIMIT 1) AS s ON true) AS f, LATERAL (
  SELECT count(*) FILTER (WHERE NOT q.passed) AS ahead,
    (extract(epoch FROM min(q.turn_end) FILTER (WHERE NOT q.passed AND isfinite(q.turn_end)) - now()) * 1000000)::bigint AS turn_left_micros
  FROM (SELECT bool_or(e.id = @id::text) OVER (ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id) AS passed, CASE WHEN f.unreleased AND coalesce(l.paused_until < f.free_since, true)
      THEN f.free_since + @retry::bigint * interval '1 microsecond'
      ELSE greatest(f.free_since, l.paused_until) + (@first::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END AS turn_end
    FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint)
    WHERE e.id = @id::text OR f.full OR (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started)) AND now() < CASE WHEN f.unreleased AND coalesce(l.paused_until < f.free_since, true)
      THEN f.free_since + @retry::bigint * interval '1 microsecond'
      ELSE greatest(f.free_since, l.paused_until) + (@first::bigint + coalesce(e.every, 0)) * interval '1 microsecond' END) AS q) AS a
WHERE l.job_name = @job::text