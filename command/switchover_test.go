package command

import (
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A live holder connected directly listens for its own job while it
// holds the lease: `release --to B` starts B's command, and `release --id
// H` ends H's, within round trips of the request, not at the holder's next
// renewal (40 s away here).
func TestReleaseOfALiveHolderActsAtOnce(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	// A renewal every 40 s (less a tenth at most): a holder that waited
	// for it would keep its lease for half a minute after the request.
	slow := func(extra ...string) []string {
		return append([]string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json",
			"--ttl", "90s", "--renew-interval", "40s", "--grace", "5s", "--retry-interval", "1s"}, extra...)
	}
	const within = 10 * time.Second

	a := lw(t, []string{child("ready block")}, slow("--job", "svc", "--id", "A", "--wait", "--", self())...)
	a.Expect(t, "ready")
	b := lw(t, []string{child("ready block")}, slow("--job", "svc", "--id", "B", "--wait", "--", self())...)
	b.WaitLog(t, "standing by: lease held by another instance")
	asked := time.Now()
	if code, out := output(t, append([]string{"release", "--job", "svc", "--to", "B"}, store...)...); code != 0 {
		t.Fatalf("release --to B exited %d: %s", code, out)
	}
	b.Expect(t, "ready")
	if took := time.Since(asked); took > within {
		t.Errorf("B's command started %s after release --to B, want well within A's renew interval (40 s)", took.Round(time.Millisecond))
	}
	if code := a.Wait(t, within); code != 75 {
		t.Errorf("A exited %d, want 75", code)
	}

	h := lw(t, []string{child("ready block")}, slow("--job", "solo", "--id", "H", "--", self())...)
	h.Expect(t, "ready")
	asked = time.Now()
	if code, out := output(t, append([]string{"release", "--job", "solo", "--id", "H"}, store...)...); code != 0 {
		t.Fatalf("release --id H exited %d: %s", code, out)
	}
	if code := h.Wait(t, 30*time.Second); code != 75 {
		t.Errorf("H exited %d, want 75", code)
	}
	if took := time.Since(asked); took > within {
		t.Errorf("H stopped %s after release --id H, want well within its renew interval (40 s)", took.Round(time.Millisecond))
	}
}
