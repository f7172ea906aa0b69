UPDATE "leader_lease" AS l SET queue = coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements(l.queue) AS x WHERE NOT (x->>'id' = @id::text)), '[]'::jsonb) || jsonb_build_array(
  jsonb_build_object('since', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 'pinned', false)
  || coalesce((SELECT jsonb_build_object('since', x->'since', 'pinned', x->'pinned')
    FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text LIMIT 1), '{}'::jsonb)
  || jsonb_build_object('holder', @holder::text, 'id', @id::text, 'priority', @priority::integer,
    'pid', CASE WHEN @listening::boolean THEN pg_catalog.pg_backend_pid() END,
    'started', CASE WHEN @listening::boolean THEN (SELECT (extract(epoch FROM a.backend_start) * 1000000)::bigint
      FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) AS a) END,
    'until', CASE WHEN NOT @listening::boolean THEN (extract(epoch FROM now()) * 1000000)::bigint + @live::bigint END,
    'every', CASE WHEN NOT @listening::boolean THEN @every::bigint END))
WHERE job_name = @job::text AND NOT coalesce(l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AND NOT EXISTS (SELECT FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = @id::text
    AND (x->>'handed_until')::bigint > (extract(epoch FROM now()) * 1000000)::bigint)
RETURNING 1