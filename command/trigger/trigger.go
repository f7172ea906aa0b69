package trigger

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
)

// minTriggerWait is the least trigger waits for a scheduler to take its
// request: a listening scheduler takes it within about a second, a busy
// database or host may take a few.
const minTriggerWait = 5 * time.Second

// Command is the trigger subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "trigger",
		Usage: "ask the running schedulers of a job to run it once now, recorded as a manual run",
		UsageText: "leasewrap trigger --job NAME [--id ID] [--retry-interval D] [--no-wait]\n\n" +
			"Records the request in the job's claims table and notifies its schedulers: one of\n" +
			"them starts the command within a second when they listen, else within their\n" +
			"--retry-interval. trigger waits three retry intervals (at least 5s; 6s by default)\n" +
			"for one to take it, and exits 0 when one did (naming it), or when the lease is\n" +
			"held: the request then waits for that run to end. When none took it and the lease\n" +
			"is free, no scheduler of the job is running (crontab lines with --once do not\n" +
			"run requests): trigger withdraws the request, so that nothing runs it later by\n" +
			"surprise, and exits 69. --no-wait only records the request and exits 0.\n\n" +
			"Exit status: 0 taken, or waiting for the lease (or recorded, with --no-wait);\n" +
			"1 the job has no schedule recorded; 64 bad flags; 69 no scheduler took it while\n" +
			"the lease was free, the job is paused (the request is withdrawn at once), the\n" +
			"tables do not exist, or the database cannot be reached.\n\n" +
			"It creates nothing. Its role needs SELECT on the lease table, and INSERT on its\n" +
			"claims table (<table>_schedule); SELECT and DELETE on the claims table too, to\n" +
			"withdraw a request nothing took (--no-wait needs neither).",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("the scheduled job to run now (required)"),
			cmdutil.IDFlag("who asks, recorded with the request (default: <hostname>-<pid>-<random>)"),
			&cli.StringFlag{Name: "ttl", EnvVars: []string{"LEASEWRAP_TTL"}, Value: lease.DefaultTTL.String(),
				Usage: "the schedulers' --ttl, which the default --retry-interval follows as theirs does"},
			&cli.StringFlag{Name: "retry-interval", EnvVars: []string{"LEASEWRAP_RETRY_INTERVAL"}, DefaultText: "ttl*2/45, 2s",
				Usage: "the schedulers' --retry-interval: trigger waits three of them (at least 5s) for one to take the request"},
			&cli.BoolFlag{Name: "no-wait", EnvVars: []string{"LEASEWRAP_TRIGGER_NO_WAIT"},
				Usage: "record the request and exit 0 without waiting for a scheduler to take it; it waits until one does"},
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       triggerAction,
	}
}

// triggerSettings reads trigger's job, its --id (the host's default holder
// when unset) and how long it waits for a scheduler to take the request.
func triggerSettings(c *cli.Context) (job, id string, within time.Duration, err error) {
	s := cmdutil.NewSettings(c)
	if job, err = cmdutil.RequireJob(s); err != nil {
		return "", "", 0, err
	}
	if id, err = cmdutil.ParseHolder(s, "id"); err != nil {
		return "", "", 0, err
	}
	if id == "" {
		id = lease.DefaultHolder()
	}
	timings, _, err := cmdutil.ParseTimings(s)
	if err != nil {
		return "", "", 0, err
	}
	return job, id, max(3*timings.RetryInterval, minTriggerWait), nil
}

func triggerAction(c *cli.Context) error {
	job, id, within, err := triggerSettings(c)
	if err != nil {
		return err
	}
	a, err := cmdutil.OpenAdmin(c)
	if err != nil {
		return err
	}
	defer a.DB.Close()
	store, err := lease.New(a.DB.Pool, lease.WithTable(a.Opts.Table), lease.WithHolder(id), lease.WithLogger(a.DB.StoreLogger(a.Log)))
	if err != nil {
		return cmdutil.Usagef("%v", err)
	}
	at, err := store.RequestRun(c.Context, job)
	switch {
	case errors.Is(err, lease.ErrNotScheduled):
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: cmdutil.Advised(err)}
	case errors.Is(err, lease.ErrNoLeaseTable):
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: a.DB.Redact.Wrap(err)}
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	}
	requested := fmt.Sprintf("run of %s requested at %s", job, at.UTC().Format(time.RFC3339Nano))
	if c.Bool("no-wait") {
		return triggerSays(c, a, requested+": one of its schedulers runs it as a manual run once the lease is free")
	}
	w, err := store.AwaitRequest(c.Context, job, at, within)
	noScheduler := fmt.Sprintf("no scheduler of %s took it within %s while its lease was free: none is running, or none reaches the database "+
		"(crontab lines with --once do not run requests)", job, within)
	switch {
	case errors.Is(err, lease.ErrNotWithdrawn):
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: a.DB.Redact.Wrap(fmt.Errorf("%s, but %s, and %w; it stays recorded, and the next scheduler of %s to start runs it",
			requested, noScheduler, err, job))}
	case err != nil:
		// The request stays: the next scheduler of the job to look runs it.
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: a.DB.Redact.Wrap(fmt.Errorf("%s, but %w; it stays recorded, and the next scheduler of %s to start runs it", requested, err, job))}
	case w.Withdrawn && w.Paused:
		by := ""
		if w.PausedBy != "" {
			by = " (by " + w.PausedBy + ")"
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: fmt.Errorf(
			"%s, but %s is paused%s: no scheduler runs it until it is resumed; the request was withdrawn: resume it (leasewrap resume --job %s) and trigger again",
			requested, job, by, job)}
	case w.Withdrawn:
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: fmt.Errorf(
			"%s, but %s; the request was withdrawn: start a scheduler of %s (--schedule without --once) and trigger again",
			requested, noScheduler, job)}
	case w.Held != nil:
		return triggerSays(c, a, fmt.Sprintf("%s: it waits, as the lease is held by %s for another %s (renewed while its run goes on); a running scheduler of %s runs it once the lease is free (crontab lines with --once do not run requests)",
			requested, w.Held.Holder, w.Held.ExpiresIn.Round(time.Second), job))
	case w.By != "":
		return triggerSays(c, a, fmt.Sprintf("%s: taken by scheduler %s, which runs it as a manual run", requested, w.By))
	}
	return triggerSays(c, a, requested+": taken by a scheduler, which runs it as a manual run")
}

// triggerSays prints trigger's one line. The request is committed and
// stands whatever the line's fate: one that cannot be written is said on
// stderr, and trigger exits 0.
func triggerSays(c *cli.Context, a *cmdutil.Admin, line string) error {
	if _, err := fmt.Fprintln(c.App.Writer, escape.Printable(line)); err != nil {
		a.Log.Warn().Err(err).Msg("run requested; cannot write that to stdout")
	}
	return nil
}
