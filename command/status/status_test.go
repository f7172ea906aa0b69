package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/golden"
	"github.com/redbite/leasewrap/lease"
)

func TestStatusTableEscapesTerminalControls(t *testing.T) {
	var buf bytes.Buffer
	evil := "evil\x1b[2J\rSPOOF\tx"
	err := printStatusTable(&buf, []inspect.JobStatus{{Job: "j", Holder: evil, State: lease.StateHeld, ExpiresIn: time.Second,
		Queue: []lease.Standby{{Holder: "queued" + evil, Listening: true}}}}, cmdutil.Verdicts{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(buf.String(), "\x1b\r") || !strings.Contains(buf.String(), `evil\x1b[2J\rSPOOF\tx`) ||
		!strings.Contains(buf.String(), `j queue: queuedevil\x1b[2J\rSPOOF\tx`+"\n") {
		t.Errorf("status printed %q, want the controls escaped", buf.String())
	}
}

func TestStatusGolden(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	code, later := 4, at.Add(90*time.Second)
	by := "host-a"
	jobs := []inspect.JobStatus{
		{Job: "nightly_report", Holder: "host-a", State: lease.StateReleased, FencingToken: 1772330400000000,
			LastStarted: &at, LastFinished: &later, LastExitCode: &code, LastHolder: &by},
		{Job: "scheduler", Holder: "host-b", State: lease.StateHeld, ExpiresIn: 44500 * time.Millisecond,
			FencingToken: 1772330460000000, LastStarted: &later, LastHolder: cmdutil.Ptr("host-b"),
			Queue: []lease.Standby{{Holder: "host-d", Priority: 1, Pinned: true, Listening: true, Since: later},
				{Holder: "host-a", Listening: true, Since: later.Add(time.Second)}, {Holder: "host-c", Since: later.Add(2 * time.Second)}}},
		{Job: "never-ran", Holder: "host-c", State: lease.StateExpired, FencingToken: 7},
	}
	v := cmdutil.Verdicts{ByJob: map[string]inspect.Verdict{
		"nightly_report": {State: inspect.StateFailing, Reason: "nightly_report last run failed, 1m0s ago (exited 4 on host-a)"},
		"scheduler":      {State: inspect.StateHealthy, Reason: "scheduler is running; no run of it has finished yet"},
	}}
	var table, js bytes.Buffer
	if err := printStatusTable(&table, jobs, v); err != nil {
		t.Fatal(err)
	}
	if err := printStatusJSON(&js, jobs, v); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "status.txt", table.String())
	golden.Check(t, "status.json", js.String())
}
