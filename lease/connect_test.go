package lease_test

import (
	"testing"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// Connect's sessions are named leasewrap in pg_stat_activity, for a DBA
// looking for them, unless the connection string names them.
func TestConnectNamesItsSessions(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{pgtest.URL(): lease.ApplicationName, pgtest.URL() + "&application_name=report": "report"} {
		pool, err := lease.Connect(ctx(t), url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(ctx(t), `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&got)
		pool.Close()
		if err != nil || got != want {
			t.Errorf("application_name %q (%v), want %q", got, err, want)
		}
	}
}
