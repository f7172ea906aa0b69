WITH renewed AS (
  UPDATE "leader_lease" SET
    expires_at = now() + @ttl::bigint * interval '1 microsecond',
    renewed_at = now()
  WHERE job_name = @row::text AND holder = @holder::text AND fencing_token = @token::bigint
    AND released_at IS NULL
  RETURNING 1)
SELECT EXISTS (SELECT FROM renewed) AS renewed, l.fencing_token AS token, l.holder, coalesce(l.released_at IS NOT NULL, false) AS released
FROM (VALUES (1)) AS one LEFT JOIN "leader_lease" AS l ON l.job_name = @row::text