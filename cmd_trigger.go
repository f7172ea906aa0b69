package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

func triggerCommand() *cli.Command {
	return &cli.Command{
		Name:  "trigger",
		Usage: "ask the running schedulers of a job to run it once now, recorded as a manual run",
		UsageText: "leasewrap trigger --job NAME [--id ID]\n\n" +
			"Records the request in the job's claims table and notifies its schedulers: one of\n" +
			"them starts the command within a second when they listen, else within their\n" +
			"--retry-interval; if the previous run still holds the lease, the request waits\n" +
			"for it to end. Writes one row: it needs SELECT on the lease table and INSERT on\n" +
			"its claims table (<table>_schedule), and creates nothing.",
		Flags: append([]cli.Flag{
			jobFlag("the scheduled job to run now (required)"),
			idFlag("who asks, recorded with the request (default: <hostname>-<pid>-<random>)"),
		}, storeFlags()...),
		OnUsageError: usageError,
		Action:       triggerAction,
	}
}

func triggerAction(c *cli.Context) error {
	s := newSettings(c)
	job, err := requireJob(s)
	if err != nil {
		return err
	}
	id := c.String("id")
	if id == "" {
		id = lease.DefaultHolder()
	} else if err := lease.CheckHolder(id); err != nil {
		return usagef("invalid %s: %v", s.source("id"), err)
	}
	a, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer a.db.close()
	store, err := lease.New(a.db.pool, lease.WithTable(a.opts.table), lease.WithHolder(id), lease.WithLogger(a.db.storeLogger(a.log)))
	if err != nil {
		return usagef("%v", err)
	}
	at, err := store.RequestRun(c.Context, job)
	switch {
	case errors.Is(err, lease.ErrNotScheduled):
		return &exitError{code: exitNotFound, err: err}
	case errors.Is(err, lease.ErrNoLeaseTable):
		return &exitError{code: exitUnavailable, err: a.db.redact.wrap(err)}
	case err != nil:
		return a.db.unavailable(err, a.log)
	}
	if _, err := fmt.Fprintln(c.App.Writer, printable(fmt.Sprintf(
		"run of %s requested at %s: one of its schedulers runs it as a manual run once the lease is free",
		job, at.UTC().Format(time.RFC3339Nano)))); err != nil {
		// The request is committed and stands: said on stderr, and exit 0.
		a.log.Warn().Err(err).Str("job", job).Time("requested_at", at).Msg("run requested; cannot write that to stdout")
	}
	return nil
}
