SELECT pg_catalog.to_regclass(@index) IS NOT NULL, coalesce((SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE')
  FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass(@claims)), false)