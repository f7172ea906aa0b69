package command

import (
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
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
	slow := func(extra ...string) []string { return slowArgs(d, time.Second, extra...) }
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

// slowArgs are d's flags with a renewal every 40 s (less a tenth at
// most), so that a holder that waited for its renewal would keep its
// lease for half a minute after a request, and retry as the retry
// interval.
func slowArgs(d db, retry time.Duration, extra ...string) []string {
	return append([]string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json",
		"--ttl", "90s", "--renew-interval", "40s", "--grace", "5s", "--retry-interval", retry.String()}, extra...)
}

// `release --to C`, C right behind the head of the queue (B): the holder
// hears the request at once and its release hands the lease to C, which
// does not listen there and takes it at its next look, within a retry
// interval (docs/standby.md); B, woken by the handoff, stays standing by.
func TestReleaseToAStandbyBehindTheHead(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// Long enough to tell C's look (one, right behind the head) from a
	// look further back (four: 8 s) and from A's renewal (40 s).
	const retry = 2 * time.Second
	start := func(id string, extra ...string) *lwtest.Proc {
		args := slowArgs(d, retry, append([]string{"--job", "svc", "--id", id}, extra...)...)
		return lw(t, []string{child("ready block")}, append(args, "--", self())...)
	}
	a := start("A")
	a.Expect(t, "ready")
	var standbys []*lwtest.Proc
	for i, id := range []string{"B", "C"} {
		standbys = append(standbys, start(id, "--wait"))
		pgtest.Eventually(t, 20*time.Second, id+" queued", func() bool {
			var n int
			err := d.pool.QueryRow(t.Context(), `SELECT coalesce(jsonb_array_length(queue), 0) FROM "`+d.table+`" WHERE job_name = 'svc'`).Scan(&n)
			return err == nil && n == i+1
		})
	}
	b, c := standbys[0], standbys[1]
	asked := time.Now()
	if code, out := output(t, "release", "--database-url", pgtest.URL(), "--table", d.table, "--job", "svc", "--to", "C"); code != 0 {
		t.Fatalf("release --to C exited %d: %s", code, out)
	}
	c.Expect(t, "ready")
	// One retry interval (jittered shorter) from A's release, which
	// follows the request within round trips; slack for a busy machine.
	if took, bound := time.Since(asked), retry+3*time.Second; took > bound {
		t.Errorf("C's command started %s after release --to C, want within a retry interval (%s) and slack: %s",
			took.Round(time.Millisecond), retry, bound)
	}
	if code := a.Wait(t, 10*time.Second); code != 75 {
		t.Errorf("A exited %d, want 75", code)
	}
	// C holds the lease, so B cannot have run; its stdout says so too.
	select {
	case line := <-b.Lines:
		t.Errorf("B, the head, printed %q: its command ran, want C's alone", line)
	default:
	}
	if out := b.Logs.String(); !strings.Contains(out, "standing by") {
		t.Errorf("B did not say it stands by: %s", out)
	}
}
