package wrap

import (
	"context"
	"errors"
	"os"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/scheduler"
)

// runScheduled is the main command with --schedule: the scheduler loop
// runs the command under each lease it takes, and the way the loop ends
// is mapped to leasewrap's exit status here. It never returns by itself,
// except with --once after the time just due.
func (w *wrapper) runScheduled(ctx context.Context, path string) error {
	err := scheduler.Run(ctx, scheduler.Config{Store: w.store, Job: w.o.job, Schedule: w.o.sched, CatchUp: w.o.catchUp,
		Once: w.o.once, Timings: w.o.timings, WaitTimeout: w.o.waitTimeout, HistoryKeep: w.o.historyKeep,
		Signals: w.sigs, Log: w.log, Monitor: w.mon, Host: &scheduledHost{w: w, path: path}})
	var (
		refused     *scheduler.RefusedError
		unavailable *scheduler.UnavailableError
	)
	switch {
	case errors.Is(err, scheduler.ErrNothingRun):
		return cmdutil.ExitWith(w.o.skipExitCode)
	case errors.Is(err, scheduler.ErrWaitTimeout):
		return w.gaveUp()
	case errors.As(err, &refused):
		return cmdutil.Usagef("refusing %s %q: %v", "--schedule", w.o.sched.Spec(), cmdutil.Advised(refused.Err))
	case errors.As(err, &unavailable):
		return w.db.Unavailable(unavailable.Err, unavailable.Log)
	}
	// nil, or the status of the last run.
	return err
}

// scheduledHost is the main command as the scheduler loop's Host.
type scheduledHost struct {
	w    *wrapper
	path string // the command's, as runner.LookPath found it
}

// RunLease runs the command under l, as a run that is not scheduled does,
// with its retries, pings and kept output.
func (h *scheduledHost) RunLease(l *lease.Lease) (os.Signal, error) {
	err := h.w.runChild(h.path, l, h.w.mon)
	return h.w.endSignal, err
}

// WatchSignals is wrapper.watchSignals.
func (h *scheduledHost) WatchSignals(ctx context.Context, fn func(context.Context) error) (os.Signal, error) {
	return h.w.watchSignals(ctx, fn)
}

// Reach stands by for the database as a --wait standby does.
func (h *scheduledHost) Reach(ctx context.Context, err error) error {
	return causeOf(ctx, h.w.reach(ctx, err))
}

// Abandon is abandonStopped.
func (h *scheduledHost) Abandon(l *lease.Lease, sig os.Signal, log zerolog.Logger) {
	abandonStopped(l, sig, log)
}

// Advised is cmdutil.Advised.
func (h *scheduledHost) Advised(err error) error { return cmdutil.Advised(err) }

// Reschedule is cmdutil.RescheduleCommand.
func (h *scheduledHost) Reschedule(job, spec string) string {
	return cmdutil.RescheduleCommand(job, spec)
}
