SELECT CASE WHEN c.relkind IN ('r', 'p')
  AND pg_catalog.to_regprocedure(@function::text) IS NOT NULL AND NOT EXISTS (SELECT FROM unnest(@functions::text[]) AS f
    LEFT JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(f)
    WHERE NOT coalesce(p.proowner = c.relowner, false))
  AND a.complete AND a.fillable
  AND (SELECT count(*) FILTER (WHERE i.indisprimary AND (i.indnkeyatts <> 1 OR i.indkey[0] <> a.key)) = 0
      AND count(*) FILTER (WHERE i.indisunique AND i.indimmediate AND i.indisvalid
      AND i.indnkeyatts = 1 AND i.indexprs IS NULL AND i.indpred IS NULL AND i.indkey[0] = a.key) > 0
    FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid)
THEN true
ELSE pg_catalog.current_setting('leasewrap: the lease table needs a catalog check')::boolean END
FROM pg_catalog.pg_class c
CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE CASE a.attname::text
      WHEN 'job_name' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text' AND a.attnotnull
      WHEN 'holder' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text' AND a.attnotnull
      WHEN 'expires_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone' AND a.attnotnull
      WHEN 'fencing_token' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'bigint' AND a.attnotnull
      WHEN 'acquired_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'renewed_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'last_started_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'last_finished_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone' AND NOT a.attnotnull
      WHEN 'last_exit_code' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'integer' AND NOT a.attnotnull
      WHEN 'last_holder' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text'
      WHEN 'released_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone' AND NOT a.attnotnull
      WHEN 'slot' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'integer' AND NOT a.attnotnull
      WHEN 'slots' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'integer' AND NOT a.attnotnull
      WHEN 'schedule' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text'
      WHEN 'last_scheduled_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'accounted_through' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'schedule_zone' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text'
      WHEN 'scheduled_since' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'paused_until' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone' AND NOT a.attnotnull
      WHEN 'paused_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone' AND NOT a.attnotnull
      WHEN 'paused_by' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text' AND NOT a.attnotnull
      WHEN 'pause_reason' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text' AND NOT a.attnotnull
      WHEN 'queue' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'jsonb'
      WHEN 'released_by' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text' AND NOT a.attnotnull
      END) = 24 AS complete,
    count(*) FILTER (WHERE a.attnotnull AND NOT (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '')
      AND a.attname::text <> ALL (ARRAY['job_name', 'holder', 'expires_at', 'fencing_token', 'acquired_at', 'renewed_at', 'last_started_at', 'last_finished_at', 'last_exit_code', 'last_holder', 'released_at', 'slot', 'slots', 'schedule', 'last_scheduled_at', 'accounted_through', 'schedule_zone', 'scheduled_since', 'paused_until', 'paused_at', 'paused_by', 'pause_reason', 'queue', 'released_by'])) = 0 AS fillable,
    max(a.attnum) FILTER (WHERE a.attname::text = 'job_name') AS key
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) a
WHERE c.oid = @relation::text::regclass