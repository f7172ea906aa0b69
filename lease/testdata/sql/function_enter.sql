CREATE OR REPLACE FUNCTION "leader_lease_enter_f1ad000e"(text,text,text,integer,boolean,bigint,bigint)
RETURNS SETOF integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
  UPDATE "leader_lease" AS l SET queue = coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements(l.queue) AS x WHERE NOT (x->>'id' = $3::text)), '[]'::jsonb) || jsonb_build_array(
  jsonb_build_object('since', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 'pinned', false)
  || coalesce((SELECT jsonb_build_object('since', x->'since', 'pinned', x->'pinned')
    FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = $3::text LIMIT 1), '{}'::jsonb)
  || jsonb_build_object('holder', $2::text, 'id', $3::text, 'priority', $4::integer,
    'pid', CASE WHEN $5::boolean THEN pg_catalog.pg_backend_pid() END,
    'started', CASE WHEN $5::boolean THEN (SELECT (extract(epoch FROM a.backend_start) * 1000000)::bigint
      FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) AS a) END,
    'until', CASE WHEN NOT $5::boolean THEN (extract(epoch FROM now()) * 1000000)::bigint + $6::bigint END,
    'every', CASE WHEN NOT $5::boolean THEN $7::bigint END))
WHERE job_name = $1::text AND NOT coalesce(l.holder = $2::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AND NOT EXISTS (SELECT FROM jsonb_array_elements(l.queue) AS x WHERE x->>'id' = $3::text
    AND (x->>'handed_until')::bigint > (extract(epoch FROM now()) * 1000000)::bigint);
  IF FOUND THEN
    RETURN NEXT 1;
  END IF;
END
$fn$