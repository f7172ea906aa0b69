package wrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/redact"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/runner"
	"github.com/redbite/leasewrap/signals"
)

// Action is the main command: hold the lease on --job, run the child while
// it holds, release it, and exit with the child's status.
func Action(c *cli.Context, child []string, hasChild bool) error {
	o, err := parseRunOptions(c, child, hasChild)
	if err != nil {
		return err
	}
	secrets := redact.New(o.store.DatabaseURL)
	log := cmdutil.NewLogger(c.App.ErrWriter, o.store, secrets)
	path, err := runner.LookPath(o.command[0])
	if err != nil {
		return err
	}
	// Catch the forwarded signals from the start: before the child exists, a
	// signal that asks to end leasewrap ends it without holding a lease.
	sigs, stopSignals := signals.Notify()
	defer stopSignals()

	db, err := cmdutil.OpenSession(o.store.DatabaseURL, secrets, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.holder == "" {
		o.holder = lease.DefaultHolder()
	}
	log = log.With().Str("holder", o.holder).Logger()
	storeLog := db.StoreLogger(log) // the store adds the job to its own lines
	log = log.With().Str("job", o.job).Logger()
	log.Debug().Stringer("ttl", o.timings.TTL).Stringer("renew_interval", o.timings.RenewInterval).
		Stringer("grace", o.timings.Grace).Stringer("retry_interval", o.timings.RetryInterval).
		Strs("following_ttl", o.derived).Msg("timings")
	mon := monitor.New(o.job, o.holder, o.timings, o.httpAddr != "")
	mon.RedactWith(db.Redact.Wrap)
	if o.httpAddr != "" {
		stop, bound, err := monitor.Serve(o.httpAddr, mon.Handler())
		if err != nil {
			return cmdutil.Usagef("cannot serve %s %q: %v", "--http-addr", o.httpAddr, err)
		}
		defer stop()
		log.Info().Str("http_addr", bound.String()).Msg("serving /livez, /readyz, /healthz, /leader and /metrics")
	}
	store, err := lease.New(db.Session, lease.WithTable(o.store.Table), lease.WithHolder(o.holder),
		lease.WithTimings(o.timings), lease.WithHoldFor(o.holdFor), lease.WithListen(o.listen),
		lease.WithSlots(o.slots), lease.WithHistoryKeep(o.historyKeep), lease.WithRequireReplicated(o.requireReplicated),
		lease.WithPriority(o.priority), lease.WithLogger(storeLog), lease.WithObserver(mon))
	if err != nil {
		return cmdutil.Usagef("%v", err)
	}
	w := &wrapper{o: o, log: log, db: db, store: store, mon: mon, sigs: sigs, children: runner.NewSupervisor()}
	if o.sched != nil {
		return w.runScheduled(c.Context, path)
	}
	l, err := w.acquire(c.Context)
	if err != nil {
		return err
	}
	w.acquired = time.Now()
	mon.Leading(l)
	defer mon.NotLeading()
	return w.runChild(path, l, mon)
}

// wrapper is one run of the main command once its settings are parsed.
type wrapper struct {
	o     runOptions
	log   zerolog.Logger
	db    *cmdutil.Database
	store *lease.Store
	mon   *monitor.Monitor
	sigs  <-chan os.Signal
	// children runs every attempt's command.
	children *runner.Supervisor
	// endSignal is the signal to end leasewrap that stopped the last run
	// (or came before it started), if one did.
	endSignal os.Signal
	// output captures the command's output (--keep-output, --ping-output);
	// kept is what the last attempt kept of it, for its history row.
	output *runOutput
	kept   []byte
	// acquired is when this instance took the lease, by the host's
	// monotonic clock: --hold-for keeps it until then plus the hold (as
	// the database counts it, give or take a round trip).
	acquired time.Time
}

// runChild runs the command while l holds, hands the lease back, and
// returns the exit status: the child's, 75 when the lease was lost, 124
// when it ran past --max-runtime.
func (w *wrapper) runChild(path string, l *lease.Lease, mon *monitor.Monitor) error {
	logCtx := w.log.With().Int64("fencing_token", l.Token())
	if w.o.slots > 1 {
		logCtx = logCtx.Int("slot", l.Slot()).Int("slots", w.o.slots)
	}
	log := logCtx.Logger()
	log.Info().Stringer("ttl", w.o.timings.TTL).Msg("acquired")
	// A signal to end that came just as the lease was taken: do not start.
	select {
	case sig := <-w.sigs:
		if signals.Ends(sig) {
			return w.stoppedBySignal(l, sig, log)
		}
	default:
	}
	w.output = newRunOutput(w.o, log)
	pings := newRunPings(w.o, w.output, log)
	defer pings.close() // after the release below
	var (
		res     runner.Result
		attempt = 1
		next    nextStep
	)
	for ; ; attempt++ {
		res = w.attempt(path, l, mon, log)
		if next = w.retryAfter(res, attempt, l, log); next.kind != stepRetry {
			break
		}
	}
	if res.Signal != nil {
		w.endSignal = res.Signal
	} else if next.kind == stepSignalled {
		w.endSignal = next.signal
	}
	if next.between() {
		return w.endBetweenAttempts(l, res, attempt, next, pings, log)
	}
	pings.finish(runExitCode(res))
	if !res.Started {
		end := lease.End{Outcome: lease.OutcomeCouldNotStart, Attempt: attempt}
		if res.Lost == nil {
			end.ExitCode = &res.Status
		}
		logRelease(l.AbandonWith(context.Background(), end), log)
		return exitStatus(res)
	}
	end := lease.End{ExitCode: recordedStatus(res), Outcome: runOutcome(res), Attempt: attempt, Output: w.kept, Ran: res.Ran, Ended: res.Ended,
		StoppedBy: stoppedBy(res)}
	if err := l.Finish(context.Background(), end); errors.Is(err, lease.ErrLost) && res.Lost == nil {
		// No renewal failed, so nothing said so yet: the row was deleted
		// or rewritten by hand between renewals (or a release retried
		// after a broken connection found it handed on by its first try).
		log.Warn().Err(err).Msg("the lease was no longer this instance's at the release: its row was deleted or changed since the last renewal; the run is recorded in the history")
	} else {
		w.logFinish(err, log)
	}
	return exitStatus(res)
}

// attempt runs the command once while l holds.
func (w *wrapper) attempt(path string, l *lease.Lease, mon *monitor.Monitor, log zerolog.Logger) runner.Result {
	stdout, stderr, endOutput := w.output.attempt()
	cmd := exec.Command(path, w.o.command[1:]...)
	cmd.Args[0] = w.o.command[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = childEnv(os.Environ(), leaseVars{job: w.o.job, holder: w.o.holder, table: w.store.Table(),
		row: l.Row(), token: l.Token(), slot: l.Slot(), scheduledAt: l.ScheduledAt()})
	cfg := runner.Config{
		Signals: w.sigs,
		Log:     log,
		Started: func() {
			mon.ChildStarted()
			// Planned while the command runs, the release is quicker to
			// hand the lease on when it ends.
			l.WarmRelease()
		},
		MaxRuntime: w.o.maxRuntime,
	}
	res := w.children.Run(cmd, l, cfg)
	// runner.Run stopped whatever the run left behind, so the pipes are
	// closed and the copies end once they have read what is left in them.
	w.kept = endOutput()
	if !res.Started {
		w.kept = nil // a command that never ran printed nothing to keep
	}
	if res.Started {
		mon.ChildExited(res.Status)
	}
	return res
}

// runOutcome is how the history records a run that started: stopped for
// an operator's release, lost for a lost lease, timed out for running past
// --max-runtime, stopped for a signal asking leasewrap to end (unless the
// command exited 0 all the same: it finished its work, as a success), ended by a
// signal nobody sent through leasewrap (a status of 128+N, as a shell
// reports its own child's death too: an OOM kill, a crash), or exited.
func runOutcome(res runner.Result) string {
	switch {
	case errors.Is(res.Lost, lease.ErrReleasedByOperator):
		return lease.OutcomeStopped
	case res.Lost != nil:
		return lease.OutcomeLost
	case res.TimedOut:
		return lease.OutcomeTimedOut
	case res.Signal != nil && res.Status != 0:
		return lease.OutcomeStopped
	case res.Status > cmdutil.ExitSignalBase && res.Status <= cmdutil.ExitSignalBase+64:
		return lease.OutcomeSignalled
	}
	return lease.OutcomeExited
}

// stoppedBy says who asked for the stop of a run runOutcome records
// stopped for a signal to leasewrap; "" for any other run (an operator's
// release is recorded from the lease row, which says who asked).
func stoppedBy(res runner.Result) string {
	if runOutcome(res) != lease.OutcomeStopped || res.Lost != nil {
		return ""
	}
	return signalStop(res.Signal)
}

// signalStop says that sig, sent to leasewrap, asked for a stop.
func signalStop(sig os.Signal) string {
	if sig == nil {
		return ""
	}
	return signals.Name(sig) + " to leasewrap"
}

// runExitCode is leasewrap's status for a run: 75 if the child had to be
// stopped for the lease, 124 if for --max-runtime, else the child's own.
func runExitCode(res runner.Result) int {
	switch {
	case res.Lost != nil:
		return cmdutil.ExitLeaseLost
	case res.TimedOut:
		return cmdutil.ExitTimedOut
	}
	return res.Status
}

// recordedStatus is the exit status the lease row and the history record
// for a run that started: 124 for one stopped for --max-runtime, as
// leasewrap itself exits and as status, history and the web page show it
// (the child's own 143 or 137 says only how it was stopped), else the
// child's. A run stopped for a lost lease keeps the child's: its outcome
// says why.
func recordedStatus(res runner.Result) *int {
	code := res.Status
	if res.TimedOut && res.Lost == nil {
		code = cmdutil.ExitTimedOut
	}
	return &code
}

// exitStatus is runExitCode as an action's error.
func exitStatus(res runner.Result) error {
	if code := runExitCode(res); code != 0 {
		return cmdutil.ExitWith(code)
	}
	return nil
}

// leaseVars is what the child is told of its lease.
type leaseVars struct {
	job, holder, table, row string
	token                   int64
	slot                    int
	// scheduledAt is the scheduled time of the run (zero: none).
	scheduledAt time.Time
}

// childEnv is the child's environment: leasewrap's, less leasewrap's own
// settings (a password among them; a nested leasewrap must not inherit
// --http-addr), plus what the child is told of its lease.
func childEnv(environ []string, v leaseVars) []string {
	own := configEnv()
	env := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(own, name)
	})
	env = append(env,
		"LEASEWRAP_JOB="+v.job,
		"LEASEWRAP_HOLDER="+v.holder,
		"LEASEWRAP_FENCING_TOKEN="+strconv.FormatInt(v.token, 10),
		"LEASEWRAP_TABLE="+v.table,
		"LEASEWRAP_SLOT="+strconv.Itoa(v.slot),
		"LEASEWRAP_LEASE="+v.row,
	)
	if !v.scheduledAt.IsZero() {
		env = append(env, "LEASEWRAP_SCHEDULED_AT="+v.scheduledAt.UTC().Format(time.RFC3339Nano))
	}
	return env
}

// acquire takes the lease once (cron) or stands by for it (--wait). A
// signal that ends leasewrap while it has no child cancels the attempt.
func (w *wrapper) acquire(ctx context.Context) (*lease.Lease, error) {
	var l *lease.Lease
	sig, err := w.watchSignals(ctx, func(ctx context.Context) error {
		var err error
		l, err = w.take(ctx)
		return err
	})

	var (
		held     *lease.HeldError
		slotsErr *lease.SlotsError
	)
	switch {
	case sig != nil:
		// Also a signal that came while the statement was on its way: hand
		// the lease straight back.
		return nil, w.stoppedBySignal(l, sig, w.log)
	case err == nil:
		return l, nil
	case errors.Is(err, errWaitTimeout):
		return nil, w.gaveUp()
	case errors.As(err, &held):
		ev := w.log.Info().Str("current_holder", held.Holder).Str("state", string(held.State)).
			Stringer("expires_in", held.ExpiresIn.Round(time.Millisecond)).Int64("current_token", held.Token)
		if held.Slots > 1 {
			ev = ev.Int("slot", held.Slot).Int("slots", held.Slots)
		}
		if p := held.Paused; p != nil {
			ev = w.log.Info().Str("paused_by", p.By).Str("reason", p.Reason).Time("paused_at", p.Since)
			if !p.Until.IsZero() {
				ev = ev.Time("until", p.Until)
			}
		}
		ev.Msg(w.skipMessage(held))
		return nil, cmdutil.ExitWith(w.o.skipExitCode)
	case errors.As(err, &slotsErr):
		return nil, cmdutil.Usagef("refusing %s %d: %v", "--slots", w.o.slots, cmdutil.Advised(err))
	case errors.Is(err, lease.ErrTakeInDoubt):
		// The database answered; the lease is in doubt, as when it is
		// lost before the command starts.
		w.log.Error().Err(err).Msg("not starting the command: the lease is in doubt")
		return nil, cmdutil.ExitWith(cmdutil.ExitLeaseLost)
	default:
		return nil, w.db.Unavailable(err, w.log)
	}
}

// gaveUp ends a wait that --wait-timeout ended: 124.
func (w *wrapper) gaveUp() error {
	w.log.Warn().Stringer("wait_timeout", w.o.waitTimeout).Msg("gave up standing by: --wait-timeout passed")
	return cmdutil.ExitWith(cmdutil.ExitWaitTimeout)
}

// watchSignals runs fn with a context that a signal to end leasewrap
// cancels (there is no child yet to forward it to), and returns that
// signal, if one came, with fn's error.
func (w *wrapper) watchSignals(ctx context.Context, fn func(context.Context) error) (os.Signal, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	received := make(chan os.Signal, 1)
	watchDone := make(chan struct{})
	go func() {
		defer close(received)
		for {
			select {
			case sig := <-w.sigs:
				if signals.Ends(sig) {
					received <- sig
					cancel(errSignal)
					return
				}
				w.log.Debug().Str("signal", sig.String()).Msg("ignoring signal: no child yet")
			case <-watchDone:
				return
			}
		}
	}()
	err := fn(ctx)
	close(watchDone)
	return <-received, err
}

// take makes the attempt the settings ask for, and says why it ended early.
func (w *wrapper) take(ctx context.Context) (*lease.Lease, error) {
	if !w.o.wait {
		l, err := w.store.TryAcquire(ctx, w.o.job)
		return l, causeOf(ctx, err)
	}
	if w.o.waitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, w.o.waitTimeout, errWaitTimeout)
		defer cancel()
	}
	l, err := w.store.Acquire(ctx, w.o.job)
	said := false
	for err != nil && ctx.Err() == nil {
		switch {
		case lease.Awaitable(err):
			// A standby stands by for the database too: one restarting, or
			// failing over (its hosts read-only until one is promoted), must
			// not make every replica exit (a crash loop in a container).
			err = w.reach(ctx, err)
		case unconfirmable(err):
			// Nor must a new primary that no standby follows yet.
			if !said {
				said = true
				w.db.Named(w.log.Warn()).Str("error", cmdutil.OneLine(err)).Stringer("retry_interval", w.o.timings.RetryInterval).
					Msg("no standby streams from the primary to confirm a take (--require-replicated); standing by and trying again every retry interval")
			}
			err = lease.BootClock().Wait(ctx, w.o.timings.RetryInterval)
		default:
			return l, causeOf(ctx, err)
		}
		if err == nil {
			l, err = w.store.Acquire(ctx, w.o.job)
		}
	}
	return l, causeOf(ctx, err)
}

// unconfirmable reports whether a --wait standby's attempt was refused
// under --require-replicated for want of a standby streaming from the
// primary, which a failover under way mends; a role that cannot see the
// standbys does not.
func unconfirmable(err error) bool {
	return errors.Is(err, lease.ErrNotReplicated) && !errors.Is(err, lease.ErrStandbysHidden)
}

// reach waits for the database after an attempt that could not reach it
// or found it read-only (err): it tries again every retry interval, and
// returns nil once the database answers and takes writes, else the error
// that ended the wait (one that waiting will not mend, or ctx's). The
// first failure is logged at warn, the others at debug; each one is
// counted and shown on /healthz.
func (w *wrapper) reach(ctx context.Context, err error) error {
	began := time.Now()
	attempts := 1
	w.mon.Unreachable(err)
	msg := "cannot reach the database; standing by and trying again every retry interval"
	if lease.ReadOnly(err) {
		msg = "the database takes no writes (a standby, or a failover under way); standing by and trying again every retry interval"
	}
	w.db.Named(w.log.Warn()).Str("error", cmdutil.OneLine(err)).Stringer("retry_interval", w.o.timings.RetryInterval).Msg(msg)
	for {
		if err := lease.BootClock().Wait(ctx, w.o.timings.RetryInterval); err != nil {
			return err
		}
		attempts++
		err = w.ping(ctx)
		switch {
		case err == nil:
			w.mon.Contacted()
			w.db.Named(w.log.Info()).Int("attempts", attempts).Stringer("after", time.Since(began).Round(time.Millisecond)).
				Msg("reached the database")
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !lease.Awaitable(err):
			return err
		}
		w.mon.Unreachable(err)
		still := "still cannot reach the database"
		if lease.ReadOnly(err) {
			still = "the database still takes no writes"
		}
		w.log.Debug().Str("error", cmdutil.OneLine(err)).Int("attempts", attempts).Msg(still)
	}
}

// ping connects to the database, or reuses a connection, and asks it
// whether it takes writes, within a TTL.
func (w *wrapper) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.o.timings.TTL)
	defer cancel()
	var readOnly string
	if err := w.db.Session.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
		return err
	}
	if readOnly == "on" {
		return fmt.Errorf("%w: transaction_read_only is on", lease.ErrReadOnly)
	}
	return nil
}

// causeOf replaces err with the reason ctx ended, when it did: a failed
// statement is only the symptom of a signal or a timeout.
func causeOf(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// skipMessages say why this instance sat out, by the state of the lease.
var skipMessages = map[lease.State]string{
	lease.StateHeld:      "skipped: lease held by another instance",
	lease.StateKept:      "skipped: another instance ran the job and --hold-for keeps its lease",
	lease.StateReleasing: "skipped: lease held by another instance, which an operator asked to stop",
	// A take that began before another instance's release committed.
	lease.StateReleased: "skipped: another instance held the lease and released it just as this one tried to take it",
	lease.StatePaused:   "skipped: the job is paused (leasewrap resume ends it)",
}

// sameIDSkipMessages say why this instance sat out when the lease is
// held under its own --id: by an earlier run with that id (a cron line
// still running, or one whose --hold-for keeps the lease), not by another
// instance.
var sameIDSkipMessages = map[lease.State]string{
	lease.StateHeld:      "skipped: lease held by an earlier run with this --id, still going",
	lease.StateKept:      "skipped: an earlier run with this --id ran the job and --hold-for keeps its lease",
	lease.StateReleasing: "skipped: lease held by an earlier run with this --id, which an operator asked to stop",
	lease.StateReleased:  "skipped: an earlier run with this --id released the lease just as this one tried to take it",
}

// skipMessage says why this instance sat out, as held describes the lease.
func (w *wrapper) skipMessage(held *lease.HeldError) string {
	if m, ok := sameIDSkipMessages[held.State]; ok && w.o.holder != "" && held.Holder == w.o.holder {
		return m
	}
	return skipMessages[held.State]
}

var (
	errSignal      = errors.New("stopped by signal")
	errWaitTimeout = errors.New("wait timeout")
)

// stoppedBySignal hands back l (if any) unused and exits 128+N, for a
// signal that ended leasewrap before its command started.
func (w *wrapper) stoppedBySignal(l *lease.Lease, sig os.Signal, log zerolog.Logger) error {
	w.endSignal = sig
	switch {
	case l != nil && !l.ScheduledAt().IsZero():
		// The time is claimed: the history says why it did not run.
		abandonStopped(l, sig, log)
	case l != nil:
		logRelease(l.Abandon(context.Background()), log)
	}
	log.Info().Str("signal", sig.String()).Msg("stopped by signal before the command started")
	return cmdutil.ExitWith(cmdutil.ExitSignalBase + signals.Number(sig))
}

// abandonStopped hands back l unused, taken just as sig, a signal to end
// leasewrap, came: the history records the run stopped by sig.
func abandonStopped(l *lease.Lease, sig os.Signal, log zerolog.Logger) {
	logRelease(l.AbandonWith(context.Background(), lease.End{Outcome: lease.OutcomeStopped, StoppedBy: signalStop(sig)}), log)
}

// logFinish logs how handing the lease back after a run went: one handed
// back before its --hold-for ran out is kept until then, not released.
func (w *wrapper) logFinish(err error, log zerolog.Logger) {
	if kept := w.o.holdFor - time.Since(w.acquired); err == nil && w.o.holdFor > 0 && kept > 0 {
		log.Info().Time("until", time.Now().Add(kept)).Msg("kept until --hold-for ends")
		return
	}
	logRelease(err, log)
}

// logRelease logs how handing the lease back went; a failure only means the
// lease runs out by itself.
func logRelease(err error, log zerolog.Logger) {
	switch {
	case err == nil:
		log.Info().Msg("released")
	case errors.Is(err, lease.ErrLost):
		log.Debug().Err(err).Msg("nothing to release")
	default:
		log.Warn().Err(err).Msg("release failed; the lease will expire after its TTL")
	}
}
