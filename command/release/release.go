package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
)

// Command is the release subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "release",
		Usage:     "ask a live holder to hand its lease back (or on, to a standby of your choice), or free a dead holder's lease with --force",
		UsageText: "leasewrap release --job NAME [--slot K] (--id ID | --to STANDBY | --force [--yes])",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("lease name (required)"),
			cmdutil.IDFlag("release only if this holder id has it"),
			&cli.StringFlag{Name: "slot", Value: "1", Usage: "which slot of a job run with --slots"},
			&cli.StringFlag{Name: "to", Usage: "hand the lease (with --slot, that slot) to this standby (its holder id, as status lists the queue) once the holder has stopped its command"},
			&cli.BoolFlag{Name: "force", Usage: "free the lease at once, without waiting for the holder to stop (for a holder that died)"},
			&cli.BoolFlag{Name: "yes", Usage: "with --force: free it even though its holder renewed within the TTL"},
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       releaseAction,
	}
}

func releaseAction(c *cli.Context) error {
	r, err := parseRequest(c)
	if err != nil {
		return err
	}
	a, err := cmdutil.OpenAdmin(c)
	if err != nil {
		return err
	}
	defer a.DB.Close()
	jobs, err := a.Read.Status(c.Context, r.job)
	switch {
	case errors.Is(err, inspect.ErrNoTable):
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: err}
	case errors.Is(err, lease.ErrNoJob):
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: err}
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	}
	i := slices.IndexFunc(jobs, func(j inspect.JobStatus) bool { return j.Slot == r.slot })
	if i < 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("job %s has no slot %d (it has %d)", escape.Printable(r.job), r.slot, jobs[0].Slots)}
	}
	j := jobs[i]
	if err := releasable(j, r.id, r.force, r.yes); err != nil {
		return err
	}
	store, err := a.Store()
	if err != nil {
		return err
	}
	if r.to != "" {
		if err := pin(c, a, store, j, r.to); err != nil {
			return err
		}
	}
	if j.State == lease.StateReleasing && !r.force && (j.Holder == r.id || r.to != "") {
		// Asked for already: what this command would ask for is under way.
		return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable("release already requested: "+r.outcome(j.Holder, j.FencingToken))))
	}
	holder, token, err := releaseSeen(c.Context, a.Read, store, r, j)
	var exit *cmdutil.ExitError
	switch {
	case errors.As(err, &exit):
		return err
	case errors.Is(err, lease.ErrNoJob):
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: err}
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	}
	msg := fmt.Sprintf("released the lease on %s held by %s (token %d)", r.job, holder, token)
	if !r.force {
		msg = "release requested: " + r.outcome(holder, token)
		if r.to != "" {
			msg = "switchover requested: " + r.outcome(holder, token)
		}
	}
	return cmdutil.Printed(fmt.Fprintln(c.App.Writer, escape.Printable(msg)))
}

// request is what release was asked to do.
type request struct {
	job, id, to string
	force, yes  bool
	slot        int
}

// parseRequest reads and checks release's settings.
func parseRequest(c *cli.Context) (request, error) {
	s := cmdutil.NewSettings(c)
	job, err := cmdutil.RequireJob(s)
	if err != nil {
		return request{}, err
	}
	r := request{job: job, force: c.Bool("force"), yes: c.Bool("yes")}
	if r.id, err = cmdutil.ParseHolder(s, "id"); err != nil {
		return r, err
	}
	if r.to, err = cmdutil.ParseHolder(s, "to"); err != nil {
		return r, err
	}
	switch {
	case r.to != "" && r.force:
		return r, cmdutil.Usagef("--to hands the lease on when its holder has stopped its command, --force frees it at once: use one")
	case r.id == "" && !r.force && r.to == "":
		return r, cmdutil.Usagef("release needs --id (the holder id the lease was taken under), --to (the standby to hand it to) or --force (for a holder that died)")
	}
	if r.slot, err = strconv.Atoi(c.String("slot")); err != nil || r.slot < 1 || r.slot > lease.MaxSlots {
		return r, cmdutil.Usagef("invalid %s %q: must be a number 1-%d", s.Source("slot"), c.String("slot"), lease.MaxSlots)
	}
	return r, nil
}

// releaseSeen releases the lease as the look-up j saw it. When it has
// changed hands since (a handoff between the look-up and the release), the
// refusal says who holds it now.
func releaseSeen(ctx context.Context, read *inspect.Reader, store *lease.Store, r request, j inspect.JobStatus) (string, int64, error) {
	holder, token, err := store.ReleaseHeldBy(ctx, lease.SlotRow(r.job, r.slot), r.id, j.FencingToken, r.force, r.by())
	if !errors.Is(err, lease.ErrNoJob) || r.id == "" {
		return holder, token, err
	}
	jobs, readErr := read.Status(ctx, r.job)
	if i := slices.IndexFunc(jobs, func(j inspect.JobStatus) bool { return j.Slot == r.slot }); readErr == nil && i >= 0 &&
		jobs[i].Live() && jobs[i].Holder != r.id {
		return "", 0, notHeldBy(jobs[i], r.id)
	}
	return "", 0, err
}

// notHeldBy is the refusal to release, on id's behalf, the lease in j that
// another holder has (exit 1: no live lease of that holder), saying whose
// it is.
func notHeldBy(j inspect.JobStatus, id string) error {
	now := "it is free (" + string(j.State) + ")"
	if j.Live() {
		now = "it is held by " + escape.Printable(j.Holder)
		if j.LastStarted != nil {
			now += " since " + timefmt.Stamp(*j.LastStarted)
		}
		if j.State != lease.StateHeld {
			now += " (" + string(j.State) + ")"
		}
	}
	return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("%q is not held by %s: %s; nothing released",
		j.Job, escape.Printable(id), now)}
}

// by says who asks, and how, as the holder records it with the run it
// stops: "release by root@host", "release --to B by root@host".
func (r request) by() string {
	how := "release"
	if r.to != "" {
		how += " --to " + r.to
	}
	return how + " by " + cmdutil.Operator()
}

// outcome says what the holder does once asked to release.
func (r request) outcome(holder string, token int64) string {
	to := "back"
	if r.to != "" {
		to = "to " + r.to
	}
	return fmt.Sprintf("%s is told now and stops its command (one that cannot listen stops at its next renewal, within its "+
		"--renew-interval: behind a pooler, with --listen=false, or of an earlier version), then hands the lease on %s (token %d) %s",
		holder, r.job, token, to)
}

// pin makes standby the next holder of j's lease, or says who is queued.
func pin(c *cli.Context, a *cmdutil.Admin, store *lease.Store, j inspect.JobStatus, standby string) error {
	queued, pinned, err := store.Pin(c.Context, j.Job, standby)
	if err != nil {
		return a.DB.Unavailable(err, a.Log)
	}
	if pinned {
		return nil
	}
	who := "no standby is queued"
	if len(queued) > 0 {
		who = "queued: " + strings.Join(queued, ", ")
	}
	return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("%s is not in the queue of %s (%s)",
		escape.Printable(standby), escape.Printable(j.Job), escape.Printable(who))}
}

// releasable says why the lease in j cannot or should not be released as
// asked, in words that say what to do instead.
func releasable(j inspect.JobStatus, id string, force, yes bool) error {
	holder := escape.Printable(j.Holder)
	switch {
	case id != "" && j.Holder != id:
		return notHeldBy(j, id)
	case !j.Live():
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("the lease on %s is already free (%s)", escape.Printable(j.Job), j.State)}
	case j.State == lease.StateKept && !force:
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("the command of %s has finished; --hold-for keeps the lease on %s for another %s: add --force to end the hold now",
			holder, escape.Printable(j.Job), j.ExpiresIn.Round(time.Second))}
	case force && j.State != lease.StateKept && !yes:
		return cmdutil.Usagef("%s holds the lease on %s and renewed it within the TTL, so it is probably alive: --force would let another instance start while its command still runs. Use release --id %s to let it stop first, or add --yes if you know it is dead",
			holder, escape.Printable(j.Job), holder)
	}
	return nil
}
