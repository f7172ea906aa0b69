package command

import (
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/wrap"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

func TestPingsTellTheMonitorHowTheRunEnded(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, tc := range []struct {
		script string
		code   int
		want   []string
	}{
		{"exit 0", 0, []string{"POST /check/start ", "POST /check "}},
		{"echo boom >&2; exit 3", 3, []string{"POST /check/start ", "POST /check/3 boom"}},
	} {
		m := lwtest.NewMonitor(t, nil)
		p := lw(t, nil, d.args("--job", "pinged", "--ping-url", m.URL+"/check", "--ping-output", "--", "sh", "-c", tc.script)...)
		if got := p.Wait(t, 15*time.Second); got != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.script, got, tc.code)
		}
		var got []string
		pgtest.Eventually(t, 5*time.Second, "both pings", func() bool { got = m.Lines(); return len(got) >= 2 })
		if len(got) != 2 || got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("%q: monitor received %q, want %q", tc.script, got, tc.want)
		}
	}
}

func TestASkippedRunPingsNothing(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	leader := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--", self())...)
	leader.Expect(t, "ready")
	m := lwtest.NewMonitor(t, nil)
	skip := lw(t, nil, d.args("--job", "j", "--ping-url", m.URL+"/check", "--", "true")...)
	if got := skip.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("skip exited %d", got)
	}
	skip.WaitLog(t, "skipped: lease held by another instance")
	if got := m.Lines(); len(got) != 0 {
		t.Errorf("a skipped run pinged %q", got)
	}
}

// A monitor that never answers holds up neither the command nor the
// release: leasewrap waits for it at most a couple of seconds at exit. Timed
// from leasewrap's own log lines (acquired, released), so that how fast a
// process starts on a busy machine does not enter it: a ping waited for
// would cost its 5s timeout.
func TestAHangingMonitorDelaysNothing(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	m := lwtest.NewHangingMonitor(t)
	p := lw(t, nil, d.args("--job", "hung-monitor", "--ping-url", m.URL+"/check", "--", "true")...)
	window := p.Window()
	released := logTime(t, p.WaitLog(t, "released"))
	stalled := window.StalledIn(released.Sub(window.Start()))
	if took := released.Sub(logTime(t, p.WaitLog(t, "acquired"))); took > 2*time.Second+stalled {
		t.Errorf("the lease was released %s after it was acquired, want no wait for the monitor (+%s stalled)", took, stalled)
	}
	if got := p.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("exit %d, want the command's 0 despite the monitor", got)
	}
	if took, stalled := time.Since(released), window.Stalled(); took > wrap.PingCloseTimeout+time.Second+stalled {
		t.Errorf("leasewrap exited %s after the release, want at most about %s for the pings (+%s stalled)", took, wrap.PingCloseTimeout, stalled)
	}
}
