WITH left_queue AS (
  UPDATE "leader_lease" AS l SET queue = CASE WHEN l.job_name = @job::text THEN coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements(l.queue) AS x WHERE NOT (x->>'id' = @id::text)), '[]'::jsonb) END,
    expires_at = CASE WHEN (coalesce(l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AND CASE WHEN l.job_name = @job::text THEN NOT coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false)
    ELSE coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false) END) THEN now() ELSE l.expires_at END
  WHERE job_name IN (SELECT CASE WHEN g = 1 THEN @job::text ELSE @job::text || '#' || g END FROM generate_series(1, @slots::integer) AS g) AND (l.job_name = @job::text AND coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false) OR (coalesce(l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AND CASE WHEN l.job_name = @job::text THEN NOT coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false)
    ELSE coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false) END))
  RETURNING l.expires_at = now() AND l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AS freed)
SELECT pg_notify(@job_channel::text, @job::text) FROM left_queue WHERE freed LIMIT 1