package status

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
)

// Command is the status subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show leases and their last runs (exit 1 if --job has no lease row)",
		UsageText: "leasewrap status [--job NAME] [--json] [--fail-on-error]",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("show only this job"),
			cmdutil.JSONFlag("print a JSON array for scripts"),
			&cli.BoolFlag{Name: "fail-on-error", Usage: "exit 2 if a job shown is failing: the run it is judged by failed (a run leasewrap was asked to stop is no failure)"},
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action: func(c *cli.Context) error {
			s := cmdutil.NewSettings(c)
			job, err := cmdutil.ParseJob(s)
			if err != nil {
				return err
			}
			cmdutil.SayJobFromEnv(s, job)
			a, err := cmdutil.OpenAdmin(c)
			if err != nil {
				return err
			}
			defer a.DB.Close()
			jobs, err := a.Read.Status(c.Context, job)
			switch {
			case errors.Is(err, inspect.ErrNoTable):
				return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: err}
			case errors.Is(err, lease.ErrNoJob) && job != "":
				return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: err}
			case errors.Is(err, lease.ErrNoJob):
				jobs = nil
			case err != nil:
				return a.DB.Unavailable(err, a.Log)
			}
			verdicts := cmdutil.JudgeJobs(c.Context, a.Read, job, len(jobs) > 0)
			print := printStatusTable
			if c.Bool("json") {
				print = printStatusJSON
			}
			if err := print(c.App.Writer, jobs, verdicts); err != nil {
				return &cmdutil.ExitError{Code: cmdutil.ExitIOErr, Err: fmt.Errorf("cannot write status: %w", err)}
			}
			if c.Bool("fail-on-error") && anyFailing(jobs, verdicts) {
				return cmdutil.ExitWith(cmdutil.ExitLastRunFailed)
			}
			return nil
		},
	}
}

// anyFailing reports whether a job of jobs is judged failing, as every
// view judges it. A job whose judgement cannot be read (its history is
// missing or broken) falls back on its lease row: its last run exited
// non-zero.
func anyFailing(jobs []inspect.JobStatus, verdicts cmdutil.Verdicts) bool {
	for _, j := range jobs {
		switch verdicts.Of(j.Job).State {
		case inspect.StateFailing:
			return true
		case inspect.StateUnknown:
			if j.LastExitCode != nil && *j.LastExitCode != 0 {
				return true
			}
		}
	}
	return false
}

// JobJSON is the stable JSON shape of one job in `status --json`.
type JobJSON struct {
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
	// Queue is the job's standbys in the order a release hands the lease
	// on, empty for none.
	Queue []StandbyJSON `json:"queue"`
}

// StandbyJSON is the stable JSON shape of one standby in a job's queue.
type StandbyJSON struct {
	Holder   string `json:"holder"`
	Priority int    `json:"priority"`
	// Pinned: release --to chose it as the next holder.
	Pinned bool `json:"pinned"`
	// Listening: it hears a release at once; otherwise it polls.
	Listening bool      `json:"listening"`
	Since     time.Time `json:"since"`
}

func printStatusJSON(w io.Writer, jobs []inspect.JobStatus, v cmdutil.Verdicts) error {
	out := make([]JobJSON, 0, len(jobs))
	for _, j := range jobs {
		s := JobJSON{Job: j.Job, Holder: j.Holder, State: string(j.State), FencingToken: j.FencingToken,
			LastStartedAt: timefmt.UTC(j.LastStarted), LastFinishedAt: timefmt.UTC(j.LastFinished), LastExitCode: j.LastExitCode, LastHolder: j.LastHolder}
		if j.Live() {
			s.ExpiresInSeconds = cmdutil.Ptr(j.ExpiresIn.Round(time.Millisecond).Seconds())
		}
		if d, ok := lastDuration(j); ok {
			s.LastDurationSeconds = cmdutil.Ptr(d.Seconds())
		}
		if j.Slots > 1 {
			s.Slot, s.Slots = cmdutil.Ptr(j.Slot), cmdutil.Ptr(j.Slots)
		}
		s.Schedule, s.NextScheduledAt = j.Schedule, v.Next(j)
		vd := v.Of(j.Job)
		s.Health, s.HealthReason = vd.State, vd.Reason
		s.Queue = make([]StandbyJSON, 0, len(j.Queue))
		for _, q := range j.Queue {
			s.Queue = append(s.Queue, StandbyJSON{Holder: q.Holder, Priority: q.Priority, Pinned: q.Pinned, Listening: q.Listening, Since: q.Since.UTC()})
		}
		out = append(out, s)
	}
	return escape.JSON(w, out)
}

func printStatusTable(w io.Writer, jobs []inspect.JobStatus, v cmdutil.Verdicts) error {
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
		expires, start, duration, exit, by := lastRunCells(j)
		fmt.Fprintf(tw, "%s\t", escape.Printable(j.Job))
		if slotted {
			fmt.Fprintf(tw, "%d/%d\t", max(j.Slot, 1), max(j.Slots, 1))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s", v.Of(j.Job).State, escape.Printable(j.Holder), j.State,
			expires, j.FencingToken, start, duration, exit, escape.Printable(by))
		if scheduled {
			spec, next := "-", "-"
			if j.Schedule != nil {
				spec = escape.Printable(*j.Schedule)
			}
			if at := v.Next(j); at != nil {
				next = timefmt.Stamp(*at)
			}
			fmt.Fprintf(tw, "\t%s\t%s", spec, next)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A pause is on purpose, and says who to ask: its reason in full. A
	// queue says who runs next.
	for _, j := range jobs {
		if j.Slot > 1 {
			continue
		}
		if vd := v.Of(j.Job); vd.State == inspect.StatePaused {
			if _, err := fmt.Fprintln(w, vd.Reason); err != nil {
				return err
			}
		}
		if len(j.Queue) > 0 {
			if _, err := fmt.Fprintf(w, "%s queue: %s\n", escape.Printable(j.Job), queueLine(j.Queue)); err != nil {
				return err
			}
		}
	}
	return nil
}

// queueLine is a queue in order, each standby's holder followed by what
// sets it apart: b (priority 1, pinned), c, d (polling).
func queueLine(queue []lease.Standby) string {
	out := make([]string, len(queue))
	for i, q := range queue {
		var marks []string
		if q.Priority != 0 {
			marks = append(marks, "priority "+strconv.Itoa(q.Priority))
		}
		if q.Pinned {
			marks = append(marks, "pinned")
		}
		if !q.Listening {
			marks = append(marks, "polling")
		}
		out[i] = escape.Printable(q.Holder)
		if len(marks) > 0 {
			out[i] += " (" + strings.Join(marks, ", ") + ")"
		}
	}
	return strings.Join(out, ", ")
}

// lastRunCells are a job's EXPIRES IN, LAST START, DURATION, EXIT and BY
// cells of the status table, "-" for what it does not have.
func lastRunCells(j inspect.JobStatus) (expires, start, duration, exit, by string) {
	expires, start, duration, exit, by = "-", "-", "-", "-", "-"
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
	return expires, start, duration, exit, by
}

// lastDuration is how long the last finished run took.
func lastDuration(j inspect.JobStatus) (time.Duration, bool) {
	if j.LastStarted == nil || j.LastFinished == nil || j.LastFinished.Before(*j.LastStarted) {
		return 0, false
	}
	return j.LastFinished.Sub(*j.LastStarted).Round(time.Millisecond), true
}
