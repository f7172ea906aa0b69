package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/schedule"
)

// exitLastRunFailed is status --fail-on-error's status when a job's last
// run exited non-zero.
const exitLastRunFailed = 2

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show leases and their last runs (exit 1 if --job has no lease row)",
		UsageText: "leasewrap status [--job NAME] [--json] [--fail-on-error]",
		Flags: append([]cli.Flag{
			jobFlag("show only this job"),
			jsonFlag("print a JSON array for scripts"),
			&cli.BoolFlag{Name: "fail-on-error", Usage: "exit 2 if the last run of a job shown exited non-zero"},
		}, storeFlags()...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			s := newSettings(c)
			job, err := parseJob(s)
			if err != nil {
				return err
			}
			sayJobFromEnv(s, job)
			a, err := openAdmin(c)
			if err != nil {
				return err
			}
			defer a.db.close()
			jobs, err := a.read.Status(c.Context, job)
			switch {
			case errors.Is(err, inspect.ErrNoTable):
				return &exitError{code: exitUnavailable, err: err}
			case errors.Is(err, lease.ErrNoJob) && job != "":
				return &exitError{code: exitNotFound, err: err}
			case errors.Is(err, lease.ErrNoJob):
				jobs = nil
			case err != nil:
				return a.db.unavailable(err, a.log)
			}
			verdicts := judgeJobs(c.Context, a.read, job, len(jobs) > 0)
			print := printStatusTable
			if c.Bool("json") {
				print = printStatusJSON
			}
			if err := print(c.App.Writer, jobs, verdicts); err != nil {
				return &exitError{code: exitIOErr, err: fmt.Errorf("cannot write status: %w", err)}
			}
			if c.Bool("fail-on-error") && anyFailed(jobs) {
				return exitWith(exitLastRunFailed)
			}
			return nil
		},
	}
}

// judgeJobs reads the verdicts of job's (every job's, when "") summaries:
// a job's state as every view shows it. Status reads the lease table
// alone, and answers without the history: when the summaries cannot be
// read, each job's verdict is unknown, with the reason.
func judgeJobs(ctx context.Context, read *inspect.Reader, job string, some bool) verdicts {
	v := verdicts{byJob: map[string]inspect.Verdict{}}
	if !some {
		return v
	}
	var (
		sums []inspect.JobSummary
		err  error
	)
	if job != "" {
		var js inspect.JobSummary
		js, err = read.Summary(ctx, job, monitor.RunsWindow)
		sums = []inspect.JobSummary{js}
	} else {
		sums, err = read.Summaries(ctx, monitor.RunsWindow)
	}
	if err != nil {
		v.err = err
		return v
	}
	for _, s := range sums {
		v.byJob[s.Job] = s.Verdict
	}
	return v
}

// verdicts are the jobs' verdicts status shows, or why none could be read.
type verdicts struct {
	byJob map[string]inspect.Verdict
	err   error
}

// of is job's verdict; an unknown one when it could not be read.
func (v verdicts) of(job string) inspect.Verdict {
	if vd, ok := v.byJob[job]; ok {
		return vd
	}
	reason := "not judged"
	if v.err != nil {
		reason = v.err.Error()
	}
	return inspect.Verdict{Job: job, State: inspect.StateUnknown, Reason: reason}
}

// next is job's next scheduled time: the verdict's, on the database
// clock, or by the host's when there is none.
func (v verdicts) next(j inspect.JobStatus) *time.Time {
	if vd, ok := v.byJob[j.Job]; ok {
		return timefmt.UTC(vd.Next)
	}
	return nextScheduled(j.Schedule, time.Now())
}

func anyFailed(jobs []inspect.JobStatus) bool {
	for _, j := range jobs {
		if j.LastExitCode != nil && *j.LastExitCode != 0 {
			return true
		}
	}
	return false
}

// statusJSON is the stable JSON shape of one job in `status --json`.
type statusJSON struct {
	Job                 string     `json:"job"`
	Holder              string     `json:"holder"`
	State               string     `json:"state"`
	ExpiresInSeconds    *float64   `json:"expires_in_seconds"`
	FencingToken        int64      `json:"fencing_token"`
	LastStartedAt       *time.Time `json:"last_started_at"`
	LastFinishedAt      *time.Time `json:"last_finished_at"`
	LastDurationSeconds *float64   `json:"last_duration_seconds"`
	LastExitCode        *int       `json:"last_exit_code"`
	LastHolder          *string    `json:"last_holder"`
	// Slot and Slots are there for a job with more than one slot: one
	// object per slot.
	Slot  *int `json:"slot,omitempty"`
	Slots *int `json:"slots,omitempty"`
	// Schedule and NextScheduledAt are there for a job with a schedule.
	Schedule        *string    `json:"schedule,omitempty"`
	NextScheduledAt *time.Time `json:"next_scheduled_at,omitempty"`
	// Health and HealthReason are the job's state as every view shows it
	// (healthy, paused, failing, stale, missed, overdue, unknown) and why.
	Health       string `json:"health"`
	HealthReason string `json:"health_reason"`
}

func printStatusJSON(w io.Writer, jobs []inspect.JobStatus, v verdicts) error {
	out := make([]statusJSON, 0, len(jobs))
	for _, j := range jobs {
		s := statusJSON{Job: j.Job, Holder: j.Holder, State: string(j.State), FencingToken: j.FencingToken,
			LastStartedAt: timefmt.UTC(j.LastStarted), LastFinishedAt: timefmt.UTC(j.LastFinished), LastExitCode: j.LastExitCode, LastHolder: j.LastHolder}
		if j.Live() {
			s.ExpiresInSeconds = ptr(j.ExpiresIn.Round(time.Millisecond).Seconds())
		}
		if d, ok := lastDuration(j); ok {
			s.LastDurationSeconds = ptr(d.Seconds())
		}
		if j.Slots > 1 {
			s.Slot, s.Slots = ptr(j.Slot), ptr(j.Slots)
		}
		s.Schedule, s.NextScheduledAt = j.Schedule, v.next(j)
		vd := v.of(j.Job)
		s.Health, s.HealthReason = vd.State, vd.Reason
		out = append(out, s)
	}
	return escape.JSON(w, out)
}

func printStatusTable(w io.Writer, jobs []inspect.JobStatus, v verdicts) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// A SLOT column only when a job has several: a fleet without slots
	// reads as it always did.
	slotted := slices.ContainsFunc(jobs, func(j inspect.JobStatus) bool { return j.Slots > 1 })
	if slotted {
		fmt.Fprint(tw, "JOB\tSLOT\t")
	} else {
		fmt.Fprint(tw, "JOB\t")
	}
	// SCHEDULE and NEXT columns only when a job has a schedule.
	scheduled := slices.ContainsFunc(jobs, func(j inspect.JobStatus) bool { return j.Schedule != nil })
	fmt.Fprint(tw, "HEALTH\tHOLDER\tSTATE\tEXPIRES IN\tTOKEN\tLAST START\tDURATION\tEXIT\tBY")
	if scheduled {
		fmt.Fprint(tw, "\tSCHEDULE\tNEXT")
	}
	fmt.Fprintln(tw)
	for _, j := range jobs {
		expires, start, duration, exit, by := "-", "-", "-", "-", "-"
		if j.Live() {
			expires = j.ExpiresIn.Round(100 * time.Millisecond).String()
		}
		if j.LastStarted != nil {
			start = timefmt.Stamp(*j.LastStarted)
		}
		if d, ok := lastDuration(j); ok {
			duration = d.String()
		} else if j.LastStarted != nil && j.Live() {
			duration = "running"
		}
		if j.LastExitCode != nil {
			exit = strconv.Itoa(*j.LastExitCode)
		}
		if j.LastHolder != nil {
			by = *j.LastHolder
		}
		fmt.Fprintf(tw, "%s\t", escape.Printable(j.Job))
		if slotted {
			fmt.Fprintf(tw, "%d/%d\t", max(j.Slot, 1), max(j.Slots, 1))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s", v.of(j.Job).State, escape.Printable(j.Holder), j.State,
			expires, j.FencingToken, start, duration, exit, escape.Printable(by))
		if scheduled {
			spec, next := "-", "-"
			if j.Schedule != nil {
				spec = escape.Printable(*j.Schedule)
			}
			if at := v.next(j); at != nil {
				next = timefmt.Stamp(*at)
			}
			fmt.Fprintf(tw, "\t%s\t%s", spec, next)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A pause is on purpose, and says who to ask: its reason in full.
	for _, j := range jobs {
		if vd := v.of(j.Job); vd.State == inspect.StatePaused && j.Slot <= 1 {
			if _, err := fmt.Fprintln(w, vd.Reason); err != nil {
				return err
			}
		}
	}
	return nil
}

// lastDuration is how long the last finished run took.
func lastDuration(j inspect.JobStatus) (time.Duration, bool) {
	if j.LastStarted == nil || j.LastFinished == nil || j.LastFinished.Before(*j.LastStarted) {
		return 0, false
	}
	return j.LastFinished.Sub(*j.LastStarted).Round(time.Millisecond), true
}

// nextScheduled is a job's next scheduled time after now, by the
// schedule recorded with it; nil without one (or one this version cannot
// read).
func nextScheduled(spec *string, now time.Time) *time.Time {
	if spec == nil {
		return nil
	}
	if next, ok := schedule.NextOf(*spec, now); ok {
		return timefmt.UTC(&next)
	}
	return nil
}
