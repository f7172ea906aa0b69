package reschedule

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
)

// Command is the reschedule subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "reschedule",
		Usage: "switch a scheduled job to another schedule from now on, for a rolling change of its instances",
		UsageText: "leasewrap reschedule --job NAME --schedule SPEC [--timezone ZONE]\n\n" +
			"Instances started with another schedule than the job's stand by, running nothing,\n" +
			"until it is theirs: roll out the new --schedule, then switch the job with this\n" +
			"command. Instances with the old schedule then stand by (stop them at leisure), and\n" +
			"those with the new one run its times after now; a time of the old schedule not\n" +
			"yet run is not run, and no time runs twice.",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("the scheduled job (required)"),
			&cli.StringFlag{Name: "schedule", Usage: "the new schedule, as its instances' --schedule (required)"},
			&cli.StringFlag{Name: "timezone", Usage: "the zone the new schedule is read in, as its instances' --timezone (default: UTC, or CRON_TZ= in the schedule)"},
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       rescheduleAction,
	}
}

func rescheduleAction(c *cli.Context) error {
	s := cmdutil.NewSettings(c)
	job, err := cmdutil.RequireJob(s)
	if err != nil {
		return err
	}
	if c.String("schedule") == "" {
		return cmdutil.Usagef("reschedule needs --schedule, the new schedule")
	}
	sched, err := schedule.Parse(c.String("schedule"), c.String("timezone"))
	if err != nil {
		return cmdutil.Usagef("invalid --schedule: %v", err)
	}
	store, a, err := cmdutil.OperatorStore(c, s, lease.DefaultHolder())
	if err != nil {
		return err
	}
	defer a.DB.Close()
	was, err := store.Reschedule(c.Context, job, sched.Spec())
	switch {
	case errors.Is(err, lease.ErrNoJob):
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: err}
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	case was == sched.Spec():
		return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable(fmt.Sprintf(
			"job %s runs on %q already; the zone data it was recorded with are forgotten: the next instance to start records its own", job, was))))
	case was == "":
		was = "none"
	}
	return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable(fmt.Sprintf(
		"job %s runs on %q from now on (was %q): instances with the old schedule stand by; those with the new one run its times",
		job, sched.Spec(), was))))
}
