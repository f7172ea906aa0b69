package command

import (
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A lease released without --hold-for is never reported as kept by it. A
// take whose transaction began before such a release committed still sees
// its expiry (the release's own now()) ahead: the first take of a wrapper
// runs in one transaction after its shape checks. The row here is that
// release as the take sees it: released, with expires_at = released_at
// ahead of the take's clock. The skipped peer says it was released, and
// status shows it released, not kept.
func TestReleaseWithoutHoldForIsNotReportedAsKept(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	if got := lw(t, nil, d.args("--job", "j", "--", "true")...).Wait(t, 30*time.Second); got != 0 {
		t.Fatalf("first run exited %d", got)
	}
	d.exec(t, `UPDATE TABLE SET holder = 'peer', last_holder = 'peer', last_finished_at = now(),
  released_at = now() + interval '1 minute', expires_at = now() + interval '1 minute'`)
	skip := lw(t, nil, d.args("--job", "j", "--", "true")...)
	if got := skip.Wait(t, 30*time.Second); got != 0 {
		t.Fatalf("skipped run exited %d", got)
	}
	for _, e := range skip.LogEntries(t) {
		if msg, _ := e["message"].(string); strings.HasPrefix(msg, "skipped") {
			if e["state"] != "released" || strings.Contains(msg, "hold-for") {
				t.Errorf("skipped with state %v: %q, want state released and no word of --hold-for", e["state"], msg)
			}
		}
	}
	skip.WaitLog(t, "skipped: another instance held the lease and released it just as this one tried to take it")
	st := lw(t, nil, "status", "--json", "--job", "j", "--database-url", pgtest.URL(), "--table", d.table)
	var out strings.Builder
	for line := range st.Lines {
		out.WriteString(line)
	}
	if !strings.Contains(out.String(), `"state": "released"`) {
		t.Errorf("status --json: %s, want the lease shown released", out.String())
	}
}
