WITH target AS (SELECT coalesce(@target::pg_lsn, pg_catalog.pg_current_wal_flush_lsn()) AS lsn)
SELECT t.lsn::text AS target, current_user::text AS role, pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') AS visible,
  count(r.pid) AS streaming, coalesce(bool_and(r.replay_lsn >= t.lsn), false) AS replayed, coalesce(min(r.replay_lsn)::text, '') AS slowest
FROM target t LEFT JOIN pg_catalog.pg_stat_replication r ON r.state = 'streaming' AND r.replay_lsn IS NOT NULL
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
GROUP BY t.lsn