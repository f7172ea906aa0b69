package command

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A wrapper frozen (SIGSTOP) during its first take for longer than the
// take's budget (the TTL less grace and safety margin: 4.2s here) finds
// its budget spent while the database was fine. It tries once more: the
// command runs when the stall came before the take reached the database.
// When the take had committed and only its answer was late, either the
// answer is read first, too late to use, and the lease it took is handed
// back before the second try, which takes the lease again and runs the
// command; or the second try finds that lease live under the wrapper's
// own id, in doubt, and the command does not run (exit 75), with a line
// saying so. Never "lease store unavailable". The proxy's latency holds
// the take in flight so that the stop lands where the test wants it,
// which it checks in the table while the wrapper is stopped.
func TestWrapperFrozenDuringItsFirstTake(t *testing.T) {
	t.Parallel()
	const budget = 4200 * time.Millisecond
	for _, tc := range []struct {
		name      string
		committed bool // stop once the take has committed, not while connecting
		want      int  // or 0 too, after a take committed
	}{
		{"while connecting", false, 0},
		{"after its take committed", true, 75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			if tc.committed {
				// The table exists, so that the take is the first
				// statement to write.
				if got := lw(t, nil, d.args("--job", "other", "--", "true")...).Wait(t, 30*time.Second); got != 0 {
					t.Fatalf("creating the table: exit %d", got)
				}
			}
			proxy, url := pgtest.Proxied(t, d.pool)
			// The second try connects again (the first one's connection
			// was cut with its statement): a loaded machine can take
			// longer than the proxy's one second to let it in.
			url = strings.Replace(url, "connect_timeout=1", "connect_timeout=5", 1)
			proxy.SetLatency(200 * time.Millisecond)
			args := append(d.args("--ttl", "6s", "--renew-interval", "1500ms", "--grace", "1500ms", "--retry-interval", "300ms", "--log-level", "debug"),
				"--database-url", url, "--id", "frozen", "--job", "j", "--", self())
			p := lw(t, []string{child("ready")}, args...)
			if tc.committed {
				pgtest.Eventually(t, 30*time.Second, "the take committed", func() bool { return d.holder(t, "j") == "frozen" })
			} else {
				// The first connection is dialled inside the take, whose
				// budget is running: the proxy's latency holds it there.
				pgtest.Eventually(t, 30*time.Second, "the take connecting", func() bool { return proxy.Conns() > 0 })
			}
			if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Cmd.Process.Signal(syscall.SIGCONT) })
			proxy.SetLatency(0)
			if !tc.committed && d.holder(t, "j") != "" {
				t.Fatal("the take committed before the wrapper was stopped")
			}
			stopped := time.Now()
			// The stall itself, which the test is about: longer than the
			// take's budget, shorter than the TTL.
			time.Sleep(budget + 500*time.Millisecond)
			if tc.committed && time.Since(stopped) >= 6*time.Second-500*time.Millisecond {
				t.Fatal("stopped too long: the lease taken may expire before the wrapper tries again")
			}
			if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			got := p.Wait(t, 30*time.Second)
			if got != tc.want && !(tc.committed && got == 0) {
				t.Errorf("exit %d, want %d", got, tc.want)
			}
			entries := p.LogEntries(t)
			has := func(msg string) bool {
				return slices.ContainsFunc(entries, func(e map[string]any) bool { return e["message"] == msg })
			}
			if retried := "no answer to the take within its budget (this process stalled, or the database was slow); trying once more"; !has(retried) {
				t.Errorf("no %q log line", retried)
			}
			if has("lease store unavailable") {
				t.Error(`"lease store unavailable" logged, though the database answered in time`)
			}
			ran := false
			for range p.Lines {
				ran = true
			}
			if ran != (got == 0) {
				t.Errorf("command ran: %v, exit %d", ran, got)
			}
			if got := p.Code(); tc.committed && got == 75 && !has("not starting the command: the lease is in doubt") {
				t.Error("exit 75 without the line saying the lease is in doubt")
			}
			if has("lease lost") {
				t.Error(`"lease lost" logged for a lease that was never used`)
			}
		})
	}
}
