package command

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
)

// maxReason bounds a pause's reason, which every view shows.
const maxReason = 500

func PauseCommand() *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "stop a job fleet-wide until resumed: no instance takes its lease, and its scheduled times are recorded paused",
		UsageText: "leasewrap pause --job NAME [--until TIME] [--reason TEXT] [--id WHO]\n\n" +
			"Every instance skips the job while it is paused (exit --skip-exit-code), standbys\n" +
			"wait, and a scheduled time that comes due is recorded paused. A command running\n" +
			"now goes on to its end. status, the web page and the exporter show the pause with\n" +
			"its reason; check says WARNING. It ends with leasewrap resume, or at --until.",
		Flags: append([]cli.Flag{
			JobFlag("the job to pause (required)"),
			&cli.StringFlag{Name: "until", Usage: "end the pause by itself: a duration from now (2h) or a time (RFC 3339, as in 2026-12-24T06:00:00Z) (default: until resumed)"},
			&cli.StringFlag{Name: "reason", Usage: "why, shown in every view of the job"},
			IDFlag("who pauses, shown in every view of the job (default: <user>@<hostname>)"),
		}, StoreFlags()...),
		OnUsageError: UsageError,
		Action:       pauseAction,
	}
}

func ResumeCommand() *cli.Command {
	return &cli.Command{
		Name:         "resume",
		Usage:        "end a job's pause: its instances take the lease again, its standbys at once",
		UsageText:    "leasewrap resume --job NAME",
		Flags:        append([]cli.Flag{JobFlag("the job to resume (required)")}, StoreFlags()...),
		OnUsageError: UsageError,
		Action:       resumeAction,
	}
}

func pauseAction(c *cli.Context) error {
	s := NewSettings(c)
	job, err := RequireJob(s)
	if err != nil {
		return err
	}
	until, err := parseUntil(c.String("until"), time.Now())
	if err != nil {
		return Usagef("invalid --until %q: %v", c.String("until"), err)
	}
	reason := c.String("reason")
	if len(reason) > maxReason || strings.ContainsAny(reason, "\x00") {
		return Usagef("invalid --reason: at most %d bytes, without NUL", maxReason)
	}
	store, a, err := OperatorStore(c, s, Pauser())
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
	return Printed(fmt.Fprintln(c.App.Writer, escape.Printable(line)))
}

func resumeAction(c *cli.Context) error {
	s := NewSettings(c)
	job, err := RequireJob(s)
	if err != nil {
		return err
	}
	store, a, err := OperatorStore(c, s, Pauser())
	if err != nil {
		return err
	}
	defer a.DB.Close()
	was, err := store.Resume(c.Context, job)
	switch {
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	case was == nil:
		return Printed(fmt.Fprintln(c.App.Writer, escape.Printable("job "+job+" is not paused; nothing to resume")))
	}
	return Printed(fmt.Fprintln(c.App.Writer, escape.Printable(fmt.Sprintf("resumed %s (paused by %s since %s)",
		job, was.By, was.Since.UTC().Format(time.RFC3339)))))
}

// operatorStore opens the database and a Store acting as who (--id when
// given), for an operator's command that writes.
func OperatorStore(c *cli.Context, s Settings, who string) (*lease.Store, *Admin, error) {
	if id := c.String("id"); id != "" {
		if err := lease.CheckHolder(id); err != nil {
			return nil, nil, Usagef("invalid %s: %v", s.Source("id"), err)
		}
		who = id
	}
	a, err := OpenAdmin(c)
	if err != nil {
		return nil, nil, err
	}
	store, err := lease.New(a.DB.Pool, lease.WithTable(a.Opts.Table), lease.WithHolder(who), lease.WithLogger(a.DB.StoreLogger(a.Log)))
	if err != nil {
		a.DB.Close()
		return nil, nil, Usagef("%v", err)
	}
	return store, a, nil
}

// pauser is who pauses by default: the operator's user name at this host.
func Pauser() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
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
