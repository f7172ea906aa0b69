package command

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// Every wrapper holds one backend of the server, whatever it does: a
// leader, a listening standby, a polling standby, a scheduler waiting for
// its next time (and listening for requested runs), the holders of a
// job's slots and a standby waiting for one. Each names itself in
// application_name; pg_stat_activity counts them while they run.
func TestEveryWrapperHoldsOneBackend(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// application_name keeps 63 bytes: a short prefix of this run's own.
	prefix := fmt.Sprintf("lwb%d_", os.Getpid())
	var roles []string
	// start runs role's wrapper with extra and waits for ready: its
	// command's line, or its log line.
	start := func(role, ready string, extra ...string) {
		url := pgtest.URL() + "&application_name=" + prefix + role
		p := lw(t, []string{child("ready block")}, d.argsTTL("20s", append([]string{"--database-url", url, "--id", role}, extra...)...)...)
		if ready == "" {
			p.Expect(t, "ready")
		} else {
			p.WaitLog(t, ready)
		}
		roles = append(roles, role)
	}
	const standing = "standing by: lease held by another instance"
	start("leader", "", "--job", "j", "--", self())
	start("listening", standing, "--job", "j", "--wait", "--", self())
	start("polling", standing, "--job", "j", "--wait", "--listen=false", "--", self())
	start("scheduler", "scheduler started", "--job", "s", "--schedule", "0 3 * * *", "--catch-up", "none", "--", self())
	start("slot1", "", "--job", "k", "--slots", "2", "--", self())
	start("slot2", "", "--job", "k", "--slots", "2", "--", self())
	start("slotwait", standing, "--job", "k", "--slots", "2", "--wait", "--", self())

	count := func() map[string]int {
		rows, err := d.pool.Query(context.Background(), `SELECT substr(application_name, $2), count(*) FROM pg_stat_activity
WHERE starts_with(application_name, $1) GROUP BY 1`, prefix, len(prefix)+1)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := map[string]int{}
		for rows.Next() {
			var role string
			var c int
			if err := rows.Scan(&role, &c); err != nil {
				t.Fatal(err)
			}
			n[role] = c
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Every role connected, then several renew intervals of standing by,
	// listening and probing: never a second backend, and one at the end.
	pgtest.Eventually(t, 20*time.Second, "every role connected", func() bool { return len(count()) == len(roles) })
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		n := count()
		for role, c := range n {
			if c > 1 {
				t.Fatalf("%s holds %d backends, want 1 (all: %v)", role, c, n)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	n := count()
	want := map[string]int{}
	for _, r := range roles {
		want[r] = 1
	}
	if !maps.Equal(n, want) {
		t.Errorf("backends per role %s, want one each", perRole(n))
	}
}

// perRole lists backends per role in a stable order.
func perRole(n map[string]int) string {
	var out []string
	for _, role := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s=%d", role, n[role]))
	}
	return strings.Join(out, " ")
}
