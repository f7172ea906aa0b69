UPDATE "leader_lease" AS l SET
    expires_at = now() + @ttl::bigint * interval '1 microsecond',
    renewed_at = now(),
    last_started_at = now(),
    released_by = NULL,
    queue = CASE WHEN l.job_name = @job::text THEN l.queue END
WHERE job_name IN (SELECT CASE WHEN g = 1 THEN @job::text ELSE @job::text || '#' || g END FROM generate_series(1, @slots::integer) AS g) AND (coalesce(l.holder = @holder::text AND (l.renewed_at IS NULL AND l.last_started_at IS NULL AND l.last_finished_at IS NULL
    AND l.acquired_at IS NOT NULL) AND l.expires_at > now(), false) AND CASE WHEN l.job_name = @job::text THEN NOT coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false)
    ELSE coalesce(l.queue @> jsonb_build_array(jsonb_build_object('id', @id::text)), false) END) AND released_at IS NULL
RETURNING fencing_token AS token, coalesce(slot, 1) AS slot