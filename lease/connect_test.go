package lease_test

import (
	"strings"
	"testing"
	"time"

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

// Connect's sessions send times in the ISO style, the only one pgx reads
// as text (its exec mode), whatever DateStyle the database, the role or
// the URL sets: a scheduler on a database with DateStyle "SQL, DMY" could
// not read its first time.
func TestConnectReadsTimesWhateverTheDateStyle(t *testing.T) {
	t.Parallel()
	for _, param := range []string{"options=-cdatestyle%3DSQL%2CDMY", "DateStyle=German"} {
		pool, err := lease.Connect(ctx(t), pgtest.URL()+"&"+param)
		if err != nil {
			t.Fatal(err)
		}
		var now time.Time
		err = pool.QueryRow(ctx(t), `SELECT now()`).Scan(&now)
		pool.Close()
		if err != nil || time.Since(now).Abs() > time.Hour {
			t.Errorf("with %s: read now() as %v (%v)", param, now, err)
		}
	}
}

// Connect asks for no DateStyle at start-up: PgBouncer compares a client's
// start-up DateStyle with the server's own words for it ("ISO, MDY") and
// sends a SET ahead of every transaction where they differ, which doubled
// the transactions of a fleet of standbys polling through it.
func TestConnectSendsNoDateStyleAtStartUp(t *testing.T) {
	t.Parallel()
	pool, err := lease.Connect(ctx(t), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for name, value := range pool.Config().ConnConfig.RuntimeParams {
		if strings.EqualFold(name, "datestyle") {
			t.Errorf("start-up parameter %s=%q", name, value)
		}
	}
}
