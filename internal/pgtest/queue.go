package pgtest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MixedQueue writes into the lease row of job in table a queue of
// standbys out of their order: a release hands the lease to b (pinned),
// then listener (priority 1, listening on conn's backend, which must stay
// open), then d and e (polling, priority 0, first come first), and never
// to dead-standby (priority 9, whose entry stopped counting). Each
// entered at since and a second or more later.
func MixedQueue(t testing.TB, conn *pgxpool.Conn, table, job, listener string, since time.Time) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `WITH t AS (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now,
  (SELECT (extract(epoch FROM backend_start) * 1000000)::bigint FROM pg_stat_activity WHERE pid = pg_backend_pid()) AS started)
UPDATE `+pgx.Identifier{table}.Sanitize()+` SET queue = jsonb_build_array(
  jsonb_build_object('holder', 'e', 'id', 'x5', 'priority', 0, 'since', $1::bigint + 2000000, 'until', t.now + 60000000),
  jsonb_build_object('holder', 'dead-standby', 'id', 'x0', 'priority', 9, 'since', $1::bigint, 'until', t.now - 1000000),
  jsonb_build_object('holder', 'd', 'id', 'x4', 'priority', 0, 'since', $1::bigint + 1000000, 'until', t.now + 60000000),
  jsonb_build_object('holder', $2::text, 'id', 'x3', 'priority', 1, 'since', $1::bigint + 4000000, 'pid', pg_backend_pid(), 'started', t.started),
  jsonb_build_object('holder', 'b', 'id', 'x2', 'priority', 0, 'since', $1::bigint + 5000000, 'until', t.now + 60000000, 'pinned', true))
FROM t WHERE job_name = $3`, since.UnixMicro(), listener, job); err != nil {
		t.Fatal(err)
	}
}
