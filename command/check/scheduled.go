package check

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
)

// checkScheduled is check without --max-age, for a job with a schedule:
// its latest due time decides, as inspect.Judge decides it for every view.
// It is CRITICAL when that time was missed, its run failed, or no instance
// accounted for it (all schedulers down). A time just due is given until
// its grace has passed (a minute, at most half the period) before it
// counts: until then the one before decides.
func checkScheduled(c *cli.Context, job string) error {
	a, err := cmdutil.OpenAdmin(c)
	if err != nil {
		return unknown(c, job, err)
	}
	defer a.DB.Close()
	js, err := a.Read.Summary(c.Context, job, monitor.RunsWindow)
	if errors.Is(err, lease.ErrNoJob) || err == nil && js.Schedule == "" {
		return unknown(c, job, fmt.Errorf("missing --max-age: how old the last success may be, as in --max-age 26h "+
			"(without it, check judges the latest due time of a job run with --schedule, and %s has none)", escape.Printable(job)))
	}
	if err != nil {
		return unknown(c, job, a.DB.Redact.Wrap(err))
	}
	r := verdictResult(js.Verdict)
	r.ScheduledAt = timefmt.UTC(js.Verdict.Due)
	if run := js.LastRun; run != nil {
		r.LastRunAt, r.LastRunOutcome, r.LastExitCode = timefmt.UTC(&run.FinishedAt), &run.Outcome, run.ExitCode
	}
	if js.LastSuccess != nil {
		r.setLastSuccess(*js.LastSuccess, js.Now)
	}
	return r.print(c.App.Writer, c.Bool("json"))
}

// verdictResult is the check's answer for a verdict: OK when healthy, WARNING when paused,
// UNKNOWN when the facts could not be read, CRITICAL otherwise.
func verdictResult(v inspect.Verdict) Result {
	r := Result{Job: v.Job, State: v.State, Message: v.Reason, code: cmdutil.CheckCritical, Status: "critical"}
	switch v.State {
	case inspect.StateHealthy:
		r.code, r.Status = cmdutil.CheckOK, "ok"
	case inspect.StatePaused:
		// Nothing runs on purpose: worth a look, not a page.
		r.code, r.Status = cmdutil.CheckWarning, "warning"
	case inspect.StateUnknown:
		r.code, r.Status = cmdutil.CheckUnknown, "unknown"
	}
	return r
}
