WITH was AS (
  SELECT last_started_at, released_by FROM "leader_lease" WHERE job_name = @row::text),
slot_queue AS (
  SELECT queue, paused_until > now() AS paused FROM "leader_lease"
  WHERE job_name = @job::text AND @row::text <> @job::text FOR UPDATE),
released AS (
  UPDATE "leader_lease" AS l SET (expires_at, released_at, released_by, last_finished_at, last_exit_code, holder, last_holder, fencing_token, acquired_at,
    renewed_at, last_started_at, last_scheduled_at, queue) = (
  SELECT CASE WHEN n.id IS NULL THEN f.expires ELSE clock_timestamp() + (@first::bigint + coalesce(n.every, 0)) * interval '1 microsecond' END,
    CASE WHEN n.id IS NULL THEN now() END,
    NULL,
    CASE WHEN n.id IS NULL THEN now() END,
    CASE WHEN n.id IS NULL THEN @exit_code::integer END,
    coalesce(n.holder, l.holder), coalesce(n.holder, l.last_holder),
    CASE WHEN n.id IS NULL THEN l.fencing_token ELSE greatest(l.fencing_token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) END,
    CASE WHEN n.id IS NULL THEN l.acquired_at ELSE now() END,
    CASE WHEN n.id IS NULL THEN l.renewed_at END,
    CASE WHEN n.id IS NULL THEN l.last_started_at END,
    CASE WHEN n.id IS NULL THEN l.last_scheduled_at END,
    CASE WHEN n.id IS NULL THEN l.queue
      WHEN @row::text <> @job::text THEN jsonb_build_array(jsonb_build_object('id', n.id, 'holder', n.holder))
      ELSE (SELECT coalesce(jsonb_agg(to_jsonb(e)), '[]'::jsonb) FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint)
        WHERE e.id <> n.id AND ((e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started)) OR e.handed_until > (extract(epoch FROM now()) * 1000000)::bigint)) END
  FROM (SELECT CASE WHEN l.expires_at <= now() THEN l.expires_at
      ELSE greatest(now(), l.acquired_at + @hold_for::bigint * interval '1 microsecond') END AS expires) AS f
  LEFT JOIN LATERAL (SELECT e.holder, e.id, e.every FROM jsonb_to_recordset(coalesce(CASE WHEN @row::text = @job::text THEN l.queue ELSE (SELECT queue FROM slot_queue) END, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint)
    WHERE @handoff::boolean AND f.expires <= now()
      AND NOT coalesce(CASE WHEN @row::text = @job::text THEN l.paused_until > now() ELSE (SELECT paused FROM slot_queue) END, false)
      AND e.holder <> @holder::text AND (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started))
    ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id LIMIT 1) AS n ON true)
  WHERE job_name = @row::text AND holder = @holder::text AND fencing_token = @token::bigint
  RETURNING l.expires_at <= now() AS free, l.fencing_token <> @token::bigint AS handed, l.holder AS next_holder,
    (SELECT e.id FROM jsonb_to_recordset(coalesce(CASE WHEN @row::text = @job::text THEN l.queue ELSE (SELECT queue FROM slot_queue) END, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE (e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started))
    AND e.id IS DISTINCT FROM CASE WHEN @row::text <> @job::text THEN l.queue->0->>'id' END ORDER BY e.pinned IS TRUE DESC, e.priority DESC, e.since, e.id LIMIT 1) AS second, (extract(epoch FROM l.expires_at) * 1000000)::bigint - (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS first_micros,
    CASE WHEN l.fencing_token <> @token::bigint THEN CASE WHEN @row::text <> @job::text THEN l.queue->0->>'id' END END AS slot_entry, (extract(epoch FROM l.expires_at) * 1000000)::bigint AS first_until,
    (SELECT last_started_at FROM was) AS last_started_at, now() AS last_finished_at),
slot_handed AS (
  UPDATE "leader_lease" AS j SET queue = (SELECT coalesce(jsonb_agg(CASE WHEN e.id = r.slot_entry THEN jsonb_build_object('id', e.id, 'holder', e.holder,
    'priority', e.priority, 'since', e.since, 'handed_until', r.first_until) ELSE to_jsonb(e) END), '[]'::jsonb)
  FROM jsonb_to_recordset(coalesce(j.queue, '[]'::jsonb)) AS e(holder text, id text, priority integer,
    since bigint, pid integer, started bigint, until bigint, every bigint, pinned boolean, handed_until bigint) WHERE e.id = r.slot_entry OR ((e.until > (extract(epoch FROM now()) * 1000000)::bigint OR e.pid IS NOT NULL AND EXISTS (
    SELECT FROM pg_catalog.pg_stat_get_activity(e.pid) AS a
    WHERE coalesce((extract(epoch FROM a.backend_start) * 1000000)::bigint, e.started) = e.started)) OR e.handed_until > (extract(epoch FROM now()) * 1000000)::bigint))
  FROM released AS r WHERE j.job_name = @job::text AND r.slot_entry IS NOT NULL),
run AS (
  INSERT INTO "leader_lease_history" (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome,
    output, scheduled_at, stopped_by)
  SELECT @job::text, @slot::integer, @holder::text, @token::bigint, @attempt::integer, coalesce(last_started_at, last_finished_at),
    last_finished_at, @exit_code::integer, @outcome::text, @output::bytea, @scheduled_at::timestamptz,
    CASE WHEN @outcome::text = 'stopped' THEN coalesce(@stopped_by::text, (SELECT released_by FROM was)) END
  FROM released WHERE @outcome::text IS NOT NULL
    AND NOT EXISTS (SELECT FROM "leader_lease_history" WHERE job_name = @job::text AND fencing_token = @token::bigint
      AND attempt >= @attempt::integer)),
pruned AS (
  DELETE FROM "leader_lease_history" WHERE ctid = ANY (ARRAY(SELECT ctid FROM "leader_lease_history"
    WHERE job_name = @job::text AND finished_at < now() - @keep::bigint * interval '1 microsecond'
    ORDER BY job_name, finished_at LIMIT 100)))
SELECT CASE WHEN free OR handed THEN pg_notify(@job_channel::text, CASE WHEN free THEN @job::text
    ELSE 'handoff' || E'\n' || next_holder || E'\n' || coalesce(second, '') || E'\n' || first_micros || E'\n' || @job::text END)::text || pg_notify(@table_channel::text, @job::text)::text END
FROM released