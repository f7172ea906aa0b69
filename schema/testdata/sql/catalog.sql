SELECT t.oid IS NOT NULL, coalesce(c.relkind::text, ''),
  coalesce(a.names, '{}'), coalesce(a.types, '{}'), coalesce(a.notnull, '{}'), coalesce(a.filled, '{}'),
  coalesce(k.pk, '{}'), EXISTS (SELECT FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_attribute ka ON ka.attrelid = i.indrelid AND ka.attname::text = @key::text
    WHERE i.indrelid = t.oid AND i.indisunique AND i.indimmediate AND i.indisvalid
      AND i.indnkeyatts = 1 AND i.indexprs IS NULL AND i.indpred IS NULL AND i.indkey[0] = ka.attnum),
  t.oid IS NOT NULL AND pg_catalog.has_table_privilege(t.oid, 'INSERT') AND pg_catalog.has_table_privilege(t.oid, 'SELECT'),
  t.oid IS NOT NULL AND pg_catalog.has_table_privilege(t.oid, 'DELETE'),
  pg_catalog.to_regprocedure(@function::text) IS NOT NULL, NOT EXISTS (SELECT FROM unnest(@functions::text[]) AS f
    LEFT JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(f)
    WHERE NOT coalesce(p.proowner = c.relowner, false)),
  ARRAY(SELECT f FROM unnest(@functions::text[]) AS f
    JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(f)
    WHERE p.proowner <> c.relowner), x.nsp,
  CASE WHEN x.nsp IN (SELECT nspname FROM pg_catalog.pg_namespace)
    THEN pg_catalog.has_schema_privilege(x.nsp, 'CREATE') ELSE false END
FROM (SELECT (SELECT oid FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass(@relation::text)) AS oid) t
CROSS JOIN (SELECT coalesce(@schema::text, current_schema()::text, '') AS nsp) x
LEFT JOIN pg_catalog.pg_class c ON c.oid = t.oid
LEFT JOIN LATERAL (
  SELECT array_agg(a.attname::text ORDER BY a.attnum) AS names,
    array_agg(pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS types,
    array_agg(a.attnotnull ORDER BY a.attnum) AS notnull,
    array_agg((a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') ORDER BY a.attnum) AS filled
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped) a ON true
LEFT JOIN LATERAL (
  SELECT array_agg(pa.attname::text ORDER BY k.ord) AS pk
  FROM pg_catalog.pg_index i
  CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_catalog.pg_attribute pa ON pa.attrelid = i.indrelid AND pa.attnum = k.attnum
  WHERE i.indrelid = t.oid AND i.indisprimary AND k.ord <= i.indnkeyatts) k ON true