package pause

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/escape"
)

// maxReason bounds a pause's reason, which every view shows.
const maxReason = 500

// Command is the pause subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "stop a job fleet-wide until resumed: no instance takes its lease, and its scheduled times are recorded paused",
		UsageText: "leasewrap pause --job NAME [--until TIME] [--reason TEXT] [--id WHO]\n\n" +
			"Every instance skips the job while it is paused (exit --skip-exit-code), standbys\n" +
			"wait, and a scheduled time that comes due is recorded paused. A command running\n" +
			"now goes on to its end. status, the web page and the exporter show the pause with\n" +
			"its reason; check says WARNING. It ends with leasewrap resume, or at --until.",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("the job to pause (required)"),
			&cli.StringFlag{Name: "until", Usage: "end the pause by itself: a duration from now (2h) or a time (RFC 3339, as in 2026-12-24T06:00:00Z) (default: until resumed)"},
			&cli.StringFlag{Name: "reason", Usage: "why, shown in every view of the job"},
			cmdutil.IDFlag("who pauses, shown in every view of the job (default: <user>@<hostname>)"),
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       pauseAction,
	}
}

// ResumeCommand is the resume subcommand.
func ResumeCommand() *cli.Command {
	return &cli.Command{
		Name:         "resume",
		Usage:        "end a job's pause: its instances take the lease again, its standbys at once",
		UsageText:    "leasewrap resume --job NAME",
		Flags:        append([]cli.Flag{cmdutil.JobFlag("the job to resume (required)")}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       resumeAction,
	}
}

func pauseAction(c *cli.Context) error {
	s := cmdutil.NewSettings(c)
	job, err := cmdutil.RequireJob(s)
	if err != nil {
		return err
	}
	until, err := parseUntil(c.String("until"), time.Now())
	if err != nil {
		return cmdutil.Usagef("invalid --until %q: %v", c.String("until"), err)
	}
	reason := c.String("reason")
	if len(reason) > maxReason || strings.ContainsAny(reason, "\x00") {
		return cmdutil.Usagef("invalid --reason: at most %d bytes, without NUL", maxReason)
	}
	store, a, err := cmdutil.OperatorStore(c, s, cmdutil.Operator())
	if err != nil {
		return err
	}
	defer a.DB.Close()
	p, running, err := store.Pause(c.Context, job, reason, until)
	if err != nil {
		return a.DB.Unavailable(err, a.Log)
	}
	line := fmt.Sprintf("paused %s (by %s", job, p.By)
	if p.Reason != "" {
		line += ": " + p.Reason
	}
	line += ")"
	if p.Until.IsZero() {
		line += " until leasewrap resume --job " + job
	} else {
		line += " until " + p.Until.UTC().Format(time.RFC3339)
	}
	if running != "" {
		line += "; the command " + running + " runs now goes on to its end"
	}
	return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable(line)))
}

func resumeAction(c *cli.Context) error {
	s := cmdutil.NewSettings(c)
	job, err := cmdutil.RequireJob(s)
	if err != nil {
		return err
	}
	store, a, err := cmdutil.OperatorStore(c, s, cmdutil.Operator())
	if err != nil {
		return err
	}
	defer a.DB.Close()
	was, err := store.Resume(c.Context, job)
	switch {
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	case was == nil:
		return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable("job "+job+" is not paused; nothing to resume")))
	}
	return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable(fmt.Sprintf("resumed %s (paused by %s since %s)",
		job, was.By, was.Since.UTC().Format(time.RFC3339)))))
}

// parseUntil reads --until: a duration from now, or an RFC 3339 time
// ("": the zero time, until resumed). It must be in the future.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return time.Time{}, errors.New("want a duration such as 2h or a time such as 2026-12-24T06:00:00Z")
		}
		t = now.Add(d)
	}
	if !t.After(now) {
		return time.Time{}, errors.New("must be in the future")
	}
	return t, nil
}
