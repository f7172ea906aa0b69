SELECT CASE WHEN c.relkind IN ('r')
  AND pg_catalog.has_table_privilege(c.oid, 'INSERT') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
  AND (NOT @prune::boolean OR pg_catalog.has_table_privilege(c.oid, 'DELETE'))
  AND a.complete AND a.fillable
THEN true
ELSE pg_catalog.current_setting('leasewrap: the history table needs a catalog check')::boolean END
FROM pg_catalog.pg_class c
CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE CASE a.attname::text
      WHEN 'job_name' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text'
      WHEN 'slot' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'integer'
      WHEN 'holder' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text'
      WHEN 'fencing_token' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'bigint'
      WHEN 'attempt' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'integer'
      WHEN 'started_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'finished_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone'
      WHEN 'exit_code' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'integer'
      WHEN 'outcome' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text'
      WHEN 'scheduled_at' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'timestamp with time zone' AND NOT a.attnotnull
      WHEN 'output' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'bytea' AND NOT a.attnotnull
      WHEN 'stopped_by' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) = 'text' AND NOT a.attnotnull
      END) = 12 AS complete,
    count(*) FILTER (WHERE a.attnotnull AND NOT (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '')
      AND a.attname::text <> ALL (ARRAY['job_name', 'slot', 'holder', 'fencing_token', 'attempt', 'started_at', 'finished_at', 'exit_code', 'outcome', 'scheduled_at', 'output', 'stopped_by'])) = 0 AS fillable,
    NULL::int2 AS key
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) a
WHERE c.oid = @relation::text::regclass