WITH q AS (
  SELECT array_agg(e.holder ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id) FILTER (WHERE (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started))) AS holders
  FROM "leader_lease" AS l, jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE l.job_name = @row::text),
pinned AS (
  UPDATE "leader_lease" AS l SET queue = (SELECT jsonb_agg(x || jsonb_build_object('pinned', x->>'holder' = @to::text)) FROM jsonb_array_elements(l.queue) AS x)
  WHERE job_name = @row::text AND @to::text = ANY (coalesce((SELECT holders FROM q), '{}'))
  RETURNING 1)
SELECT coalesce((SELECT holders FROM q), '{}') AS holders, EXISTS (SELECT FROM pinned) AS pinned