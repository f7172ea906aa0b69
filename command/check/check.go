package check

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
)

// Command is the check subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "a monitoring check: exit 0 if --job last succeeded within --max-age or runs now with no failed run since (a job with a schedule: if its latest due time ran and succeeded), 1 if it is paused, 2 if not, 3 if it cannot tell",
		UsageText: "leasewrap check --job NAME --max-age D [--fail-on-last-failure] [--json]\n" +
			"leasewrap check --job NAME [--json]   (a job run with --schedule)\n" +
			"Prints one line (Nagios/Icinga style, with perfdata) or, with --json, one object.",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("the job to check (required)"),
			&cli.StringFlag{Name: "max-age", Usage: "how long ago the last successful run may have finished, as in 26h (required for a job without a schedule)"},
			&cli.BoolFlag{Name: "fail-on-last-failure", Usage: "also exit 2 when the newest run that counts failed, even if a success is recent enough"},
			cmdutil.JSONFlag("print a JSON object for machines"),
		}, cmdutil.StoreFlags()...),
		// A monitoring system reads UNKNOWN (3) and one line on stdout, for
		// a bad flag too.
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return unknown(c, "", fmt.Errorf("%w (see leasewrap check --help)", err))
		},
		Action: checkAction,
	}
}

// Result is the verdict, and the stable JSON shape of check --json.
type Result struct {
	Job    string `json:"job"`
	Status string `json:"status"` // ok, warning (paused), critical or unknown
	// State is the job's state as every view shows it (inspect.Judge):
	// healthy, paused, failing, stale, missed, overdue, absent or unknown.
	State                 string     `json:"state"`
	Message               string     `json:"message"`
	MaxAgeSeconds         float64    `json:"max_age_seconds"`
	LastSuccessAt         *time.Time `json:"last_success_at"`
	LastSuccessAgeSeconds *float64   `json:"last_success_age_seconds"`
	LastRunAt             *time.Time `json:"last_run_at"`
	LastRunOutcome        *string    `json:"last_run_outcome"`
	LastExitCode          *int       `json:"last_exit_code"`
	// ScheduledAt is the scheduled time judged, for a job with a schedule
	// checked without --max-age.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	code        int
}

func checkAction(c *cli.Context) error {
	s := cmdutil.NewSettings(c)
	job, err := cmdutil.RequireJob(s)
	if err != nil {
		return unknown(c, "", err)
	}
	if c.String("max-age") == "" {
		return checkScheduled(c, job)
	}
	maxAge, err := s.Duration("max-age")
	if err == nil && maxAge <= 0 {
		err = fmt.Errorf("invalid %s: must be positive, as in 26h", s.Source("max-age"))
	}
	if err != nil {
		return unknown(c, job, err)
	}
	a, err := cmdutil.OpenAdmin(c)
	if err != nil {
		return unknown(c, job, err)
	}
	defer a.DB.Close()
	f, err := a.Read.Freshness(c.Context, job)
	if err != nil {
		return unknown(c, job, a.DB.Redact.Wrap(err))
	}
	// The lease rows say whether the job is paused, and, with no run at
	// all (a job that has not run yet, or no such job) or none that
	// succeeded, whether it runs its first.
	rows, err := a.Read.Status(c.Context, job)
	if err != nil && !errors.Is(err, lease.ErrNoJob) {
		// Without the lease rows a held service would look stale.
		return unknown(c, job, a.DB.Redact.Wrap(err))
	}
	known := f.LastRun != nil || err == nil
	res := judge(f, maxAge, c.Bool("fail-on-last-failure"), known, rows)
	return res.print(c.App.Writer, c.Bool("json"))
}

// judge decides the check from what the history says, by inspect.Judge
// with the check's policy: known is false when the lease table has no row
// for the job either; rows are the job's lease rows, which say whether it
// is paused, held, or being taken over by a standby.
func judge(f inspect.Freshness, maxAge time.Duration, failOnLastFailure, known bool, rows []inspect.JobStatus) Result {
	facts := inspect.Facts{Job: f.Job, Now: f.Now, Known: known, LastRun: f.LastRun, LastCounted: f.LastCounted}
	var freedAgo time.Duration = math.MaxInt64
	for _, j := range rows {
		if j.Live() {
			facts.Held = true
			facts.Holders = append(facts.Holders, j.Holder)
		}
		freedAgo = min(freedAgo, -j.ExpiresIn)
	}
	slices.Sort(facts.Holders)
	facts.Holders = slices.Compact(facts.Holders)
	if len(rows) > 0 {
		facts.Paused = rows[0].Paused
		if !facts.Held {
			facts.Standby = inspect.TakingOver(rows[0].Queue, freedAgo)
		}
	}
	if run := f.LastSuccess; run != nil {
		facts.LastSuccess, facts.LastSuccessBy = &run.FinishedAt, run.Holder
	}
	r := verdictResult(inspect.Judge(facts, inspect.Policy{MaxAge: maxAge, FailOnLastFailure: failOnLastFailure}))
	r.MaxAgeSeconds = maxAge.Seconds()
	if run := f.LastRun; run != nil {
		r.LastRunAt, r.LastRunOutcome, r.LastExitCode = timefmt.UTC(&run.FinishedAt), &run.Outcome, run.ExitCode
	}
	if run := f.LastSuccess; run != nil {
		r.setLastSuccess(run.FinishedAt, f.Now)
	}
	return r
}

// setLastSuccess fills in the newest success and its age at now (the
// database clock), in milliseconds.
func (r *Result) setLastSuccess(at, now time.Time) {
	r.LastSuccessAt, r.LastSuccessAgeSeconds = timefmt.UTC(&at), cmdutil.Ptr(math.Round(now.Sub(at).Seconds()*1000)/1000)
}

// print writes the verdict and returns its exit status.
func (r Result) print(w io.Writer, asJSON bool) error {
	var err error
	if asJSON {
		err = escape.JSON(w, r)
	} else {
		perf := ""
		if r.LastSuccessAgeSeconds != nil {
			// A scheduled job checked without --max-age has no age threshold.
			critical := ""
			if r.MaxAgeSeconds > 0 {
				critical = strconv.FormatFloat(r.MaxAgeSeconds, 'f', -1, 64)
			}
			perf = fmt.Sprintf(" | age=%ss;;%s;0", strconv.FormatFloat(*r.LastSuccessAgeSeconds, 'f', -1, 64), critical)
		}
		_, err = fmt.Fprintf(w, "%s: %s%s\n", map[int]string{cmdutil.CheckOK: "OK", cmdutil.CheckWarning: "WARNING", cmdutil.CheckCritical: "CRITICAL", cmdutil.CheckUnknown: "UNKNOWN"}[r.code], r.Message, perf)
	}
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.CheckUnknown, Err: fmt.Errorf("cannot write the check's output: %w", err)}
	}
	return cmdutil.ExitWith(r.code)
}

// unknown is the check's answer when it cannot tell: exit 3 with the
// reason, on stdout, where a monitoring system reads it.
func unknown(c *cli.Context, job string, err error) error {
	_, msg := cmdutil.ExitCode(err)
	if msg == nil {
		msg = err
	}
	r := Result{Job: job, Status: "unknown", State: inspect.StateUnknown, Message: cmdutil.OneLine(msg), code: cmdutil.CheckUnknown}
	return r.print(c.App.Writer, c.Bool("json"))
}
