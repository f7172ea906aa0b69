INSERT INTO "leader_lease" (job_name, holder, expires_at, fencing_token, released_at)
VALUES (@job::text, @holder::text, now(), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, now())
ON CONFLICT (job_name) DO NOTHING