package wrap

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/schedule"
	"github.com/redbite/leasewrap/signals"
)

// maxIdleWait bounds one sleep between scheduled times. The time to wake is
// measured on the database's clock as seen through the boot clock (which
// counts suspension and ignores wall-clock steps), but a Go timer may
// stand still while the machine is suspended: waking once a minute to look
// again costs no database round trip. A sleep is also no longer than a
// TTL, so that the loop turns as often as monitor.StuckAfter expects.
const maxIdleWait = time.Minute

// scheduler runs the command at each time of the job's schedule: every
// instance runs one, and each time is run by one of them (the claims
// table decides), or recorded as missed or skipped.
type scheduler struct {
	w   *wrapper
	mon *monitor.Monitor
	log zerolog.Logger
	// runLease runs the command under a lease taken for a scheduled time
	// and hands the lease back (wrapper.runChild; a test runs nothing).
	runLease func(*lease.Lease) error
	// clock estimates the database's clock between answers.
	clock planClock
	// last is the latest scheduled time this instance knows accounted for
	// (run, missed or skipped, by any instance), with every time before it.
	last time.Time
	// runs counts the runs of this instance, and ran is the latest one's
	// exit status as an error, for --once's.
	runs int
	ran  error
	// until, with --once, is the database's time when it started, or the
	// time just due when that comes due within schedule.DefaultEarly: it
	// plans only the times due by then, as the next crontab line runs those
	// that come due while it runs.
	until time.Time
	// due, with --once, is the time just due (schedule.JustDue), zero
	// when none is.
	due time.Time
	// failing is set while the database fails, to log it once; a
	// missing privilege (denied) is logged once at all: a take of another
	// kind that succeeds between two failures does not cure it.
	failing, denied, deniedSaid bool
	// requests says when to look for requested runs (manual.go); nil
	// with --once.
	requests *lease.RequestWatch
}

// planClock is the clock a scheduler plans on: the database's (a test
// injects another).
type planClock interface {
	// set records the database's clock from an answer (zero: none).
	set(now time.Time)
	now() time.Time
}

// dbClock is the database's clock as last seen, carried forward on the
// local boot clock: all instances plan on the one clock they share.
type dbClock struct {
	local lease.Clock
	at    time.Time     // the database's now()
	seen  time.Duration // the local clock when the answer came
}

func (c *dbClock) set(now time.Time) {
	if !now.IsZero() {
		c.at, c.seen = now, c.local.Now()
	}
}

func (c *dbClock) now() time.Time { return c.at.Add(c.local.Now() - c.seen) }

// runScheduled is the main command with --schedule: it never returns by
// itself, except with --once after the time just due.
func (w *wrapper) runScheduled(ctx context.Context, path string, mon *monitor.Monitor) error {
	sc := newScheduler(w, path, mon, &dbClock{local: lease.BootClock()})
	for {
		err := sc.runRegistered(ctx)
		if !errors.Is(err, errScheduleChanged) {
			return err
		}
		// The job's schedule was changed under this scheduler (leasewrap
		// reschedule): it stands by until its own is the job's again.
	}
}

// errScheduleChanged ends a scheduler's loop when the job's schedule is
// no longer this instance's.
var errScheduleChanged = errors.New("the job's schedule changed")

// errReached says that a scheduler standing by at its start reached the
// database: it registers again.
var errReached = errors.New("reached the database")

// register records the schedule with the job, or finds it recorded. A
// scheduler whose schedule is not the job's (another, or the same with
// other zone data) stands by, running nothing, until it is: a rolling
// change of the schedule goes on without a crash loop, and the operator
// switches the job with leasewrap reschedule. A --once line refuses (64).
//
// A scheduler is a service: one that cannot reach the database, or finds
// it taking no writes (a restart, a failover under way), stands by for it
// as a --wait standby does (reach), until --wait-timeout (124) if given; a
// Deployment of schedulers must not crash-loop through a database restart.
// A database that refuses it for good (no such database, a failed
// password) and a --once line exit 69.
func (sc *scheduler) register(ctx context.Context) (lease.Registration, error) {
	w := sc.w
	standing := false
	// --wait-timeout bounds the standing by for the database, from the
	// first time it could not be reached: not a wait for the job's
	// schedule to become this instance's, nor a slow registration.
	var giveUpAt time.Time
	for {
		sc.mon.Turned()
		var reg lease.Registration
		sig, err := w.watchSignals(ctx, func(ctx context.Context) error {
			var err error
			reg, err = w.store.Register(ctx, w.o.job, w.o.sched.Spec(), w.o.sched.ZoneRules)
			if !awaitable(err) || w.o.once {
				return causeOf(ctx, err)
			}
			if w.o.waitTimeout > 0 {
				if giveUpAt.IsZero() {
					giveUpAt = time.Now().Add(w.o.waitTimeout)
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadlineCause(ctx, giveUpAt, errWaitTimeout)
				defer cancel()
			}
			if err = w.reach(ctx, err); err == nil {
				return errReached
			}
			return causeOf(ctx, err)
		})
		if sig != nil {
			return reg, &stopSignal{sig}
		}
		var se *lease.ScheduleError
		switch {
		case errors.Is(err, errReached):
			continue
		case errors.Is(err, errWaitTimeout):
			return reg, w.gaveUp()
		case errors.As(err, &se) && w.o.once:
			return reg, cmdutil.Usagef("refusing %s %q: %v", "--schedule", w.o.sched.Spec(), cmdutil.Advised(err))
		case errors.As(err, &se):
			if !standing {
				sc.log.Warn().Err(cmdutil.Advised(err)).Str("reschedule", cmdutil.RescheduleCommand(w.o.job, w.o.sched.Spec())).
					Msg("standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")
				standing = true
			}
			if sig := sc.sleep(w.o.timings.RetryInterval); sig != nil {
				return reg, &stopSignal{sig}
			}
			continue
		case err != nil:
			return reg, w.db.Unavailable(err, w.log)
		}
		if standing {
			sc.log.Info().Msg("the job's schedule is this instance's: scheduling")
		}
		return reg, nil
	}
}

// runRegistered registers the schedule, then runs the scheduled times,
// until a signal, the end of --once, or errScheduleChanged.
func (sc *scheduler) runRegistered(ctx context.Context) error {
	w := sc.w
	reg, err := sc.register(ctx)
	var stop *stopSignal
	switch {
	case errors.As(err, &stop):
		return sc.stopped(stop.sig)
	case err != nil:
		return err
	}
	sc.clock.set(reg.Now)
	sc.until = reg.Now
	if w.o.once {
		sc.onceAt(reg.Now)
	}
	sc.last = sc.start(reg)
	next := sc.w.o.sched.Next(sc.last)
	if !w.o.once {
		// Requests to run now (leasewrap trigger, manual.go) made before
		// it listened are looked for first: once started, an idle
		// scheduler sends no statement.
		sc.requests = w.store.WatchRequests(ctx, w.o.job)
		defer func() { sc.requests.Close(); sc.requests = nil }()
		if _, stop := sc.manual(ctx, 0); stop != nil {
			return sc.exit(stop)
		}
	}
	ev := sc.log.Info().Time("accounted_through", sc.last).Time("next", next).Str("catch_up", string(sc.catchUp().Policy))
	if !sc.due.IsZero() {
		ev = ev.Time("due", sc.due)
	}
	ev.Msg("scheduler started")
	for {
		sc.mon.Turned()
		wait, stop := sc.step(ctx)
		if stop == nil && !w.o.once {
			wait, stop = sc.manual(ctx, wait)
		}
		if errors.Is(stop, errScheduleChanged) {
			return stop
		}
		if stop != nil || sc.onceDone(wait) {
			return sc.exit(stop)
		}
		if sig := sc.sleep(wait); sig != nil {
			return sc.stopped(sig)
		}
	}
}

func newScheduler(w *wrapper, path string, mon *monitor.Monitor, clock planClock) *scheduler {
	return &scheduler{w: w, mon: mon, clock: clock, log: w.log.With().Str("schedule", w.o.sched.Spec()).Logger(),
		runLease: func(l *lease.Lease) error { return w.runChild(path, l, mon) }}
}

// start is the time a scheduler accounts from: the job's latest claim,
// else (a job never scheduled) just before the latest due time when
// that one is still on time (with --once: just before the time just due),
// else now. A new job owes nothing from before it was first started.
func (sc *scheduler) start(reg lease.Registration) time.Time {
	if !reg.Latest.IsZero() {
		return reg.Latest
	}
	s, now := sc.w.o.sched, reg.Now
	if sc.w.o.once {
		if !sc.due.IsZero() && !sc.due.After(now) {
			return sc.due.Add(-time.Nanosecond)
		}
		return now
	}
	p := s.Plan(time.Time{}, now, schedule.CatchUp{Policy: schedule.CatchUpLatest, Window: sc.w.o.catchUp.Window, MaxMissed: 1})
	if len(p.Run) == 0 {
		return now
	}
	latest := p.Run[len(p.Run)-1]
	before := latest.Add(-time.Nanosecond)
	if sc.w.o.once || len(s.Plan(before, now, schedule.CatchUp{Policy: schedule.CatchUpNone}).Run) > 0 {
		return before
	}
	return latest
}

// step accounts for the times due by now: it records the missed ones and
// runs (or finds claimed) the ones to run, in order. It returns how long
// to wait before the next step, or the error to exit with.
func (sc *scheduler) step(ctx context.Context) (time.Duration, error) {
	o := sc.w.o
	plan := o.sched.Plan(sc.last, sc.planNow(), sc.catchUp())
	if missed, count := missedOf(plan); len(missed) > 0 {
		if err := sc.record(ctx, lease.OutcomeMissed, missed, count); err != nil {
			return sc.failed(err)
		}
	}
	for i, at := range plan.Run {
		// The newest time, when nothing is due after it, is the one due
		// now: a lease held then means the previous run still goes, and
		// the time is skipped. An older one waits for the holder.
		latest := i == len(plan.Run)-1 && o.sched.Next(at).After(sc.planNow())
		runs := sc.runs
		wait, done, err := sc.take(ctx, at, latest)
		if err != nil || !done {
			return wait, err
		}
		if sc.runs > runs {
			// Time passed while it ran: plan again.
			return 0, nil
		}
	}
	return sc.untilNext(), nil
}

// onceAt sets what a --once started at now (the database's time) is for:
// the time just due, waiting for it when it comes due within
// schedule.DefaultEarly, as a crontab line fires on the minute on a host
// whose clock may be ahead of the database's.
func (sc *scheduler) onceAt(now time.Time) {
	if due, ok := sc.w.o.sched.JustDue(now, schedule.DefaultGrace, schedule.DefaultEarly); ok {
		sc.due = due
		sc.until = cmdutil.MaxTime(now, due)
	}
}

// onceDone reports that a --once is done, its next step having to wait
// for a later time than the one it was started for. It goes on while
// there is more to do at once (a take to ask again) or while the time
// just due is still to come.
func (sc *scheduler) onceDone(wait time.Duration) bool {
	return sc.w.o.once && wait > 0 && sc.w.o.sched.Next(sc.last).After(sc.until)
}

// catchUp is the catch-up policy the plans use. A --once line runs only
// the time just due (the latest, when less than the grace late), as cron
// runs no time it did not fire for: it records older ones missed, as
// --catch-up none does.
func (sc *scheduler) catchUp() schedule.CatchUp {
	c := sc.w.o.catchUp
	if sc.w.o.once {
		c.Policy = schedule.CatchUpNone
	}
	return c
}

// untilNext is how long until the next scheduled time, on the database's
// clock (0 when one is due already; with --once, due by its start).
func (sc *scheduler) untilNext() time.Duration {
	return max(sc.w.o.sched.Next(sc.last).Sub(sc.planNow()), 0)
}

// planNow is the database's time as far as planning goes: with --once, no
// later than its start.
func (sc *scheduler) planNow() time.Time {
	now := sc.clock.now()
	if sc.w.o.once && now.After(sc.until) {
		return sc.until
	}
	return now
}

// missedOf lists what a plan records as missed: the summarised span (as
// one time standing for all of it), then each listed time; and how many
// times they stand for.
func missedOf(p schedule.Plan) ([]lease.Missed, int64) {
	var out []lease.Missed
	if p.Collapsed.Count > 0 {
		out = append(out, lease.Missed{At: p.Collapsed.Last, First: p.Collapsed.First})
	}
	for _, at := range p.Missed {
		out = append(out, lease.Missed{At: at})
	}
	return out, p.Collapsed.Count + int64(len(p.Missed))
}

// record writes times, which stand for count scheduled times, with
// outcome, and moves last on to the job's mark: the times recorded, or
// those another instance accounted for first (the next step plans on from
// there).
func (sc *scheduler) record(ctx context.Context, outcome string, times []lease.Missed, count int64) error {
	var (
		n           int
		now, latest time.Time
	)
	sig, err := sc.w.watchSignals(ctx, func(ctx context.Context) error {
		var err error
		n, now, latest, err = sc.w.store.RecordMissed(ctx, sc.w.o.job, outcome, times)
		return err
	})
	if sig != nil {
		return &stopSignal{sig}
	}
	if err != nil {
		return err
	}
	sc.clock.set(now)
	if latest.After(sc.last) {
		sc.last = latest
	}
	if n > 0 {
		sc.logRecorded(outcome, times, count, n)
	}
	sc.recovered()
	return nil
}

// logRecorded says which scheduled times record wrote: n of the entries
// times, which stand for count times. A summary stands for every time
// from its First; when another instance had recorded some of the entries,
// only the rows written are known.
func (sc *scheduler) logRecorded(outcome string, times []lease.Missed, count int64, n int) {
	ev := sc.log.Warn()
	if outcome == lease.OutcomeSkipped {
		ev = sc.log.Info()
	}
	first := times[0].First
	if first.IsZero() {
		first = times[0].At
	}
	if n < len(times) {
		ev = ev.Int("rows", n)
	} else {
		ev = ev.Int64("times", count)
	}
	ev.Time("first", first).Time("last", times[len(times)-1].At).Str("outcome", outcome).
		Msg("recorded scheduled times nobody ran")
}

// stopSignal is a signal to end leasewrap that came during a database call.
type stopSignal struct{ sig os.Signal }

func (s *stopSignal) Error() string { return "stopped by signal " + s.sig.String() }

// take tries to take the lease for the time at and run it. done reports
// that the time is accounted for; when it is not, wait says when to try
// again.
func (sc *scheduler) take(ctx context.Context, at time.Time, latest bool) (wait time.Duration, done bool, _ error) {
	o := sc.w.o
	var c lease.Claim
	sig, err := sc.w.watchSignals(ctx, func(ctx context.Context) error {
		var err error
		c, err = sc.w.store.TakeScheduled(ctx, o.job, o.sched.Spec(), at, latest)
		return err
	})
	if sig != nil {
		if c.Lease != nil {
			logRelease(c.Lease.AbandonWith(context.Background(), lease.End{Outcome: lease.OutcomeStopped, StoppedBy: signalStop(sig)}), sc.log)
		}
		return 0, false, &stopSignal{sig}
	}
	var (
		se       *lease.ScheduleError
		slotsErr *lease.SlotsError
	)
	switch {
	case errors.As(err, &se) && !o.once:
		sc.log.Warn().Err(cmdutil.Advised(err)).Msg("the job's schedule changed under this scheduler")
		return 0, false, errScheduleChanged
	case errors.As(err, &se), errors.As(err, &slotsErr):
		return 0, false, cmdutil.Usagef("refusing %s %q: %v", "--schedule", o.sched.Spec(), cmdutil.Advised(err))
	case err != nil:
		wait, err := sc.failed(err)
		return wait, false, err
	}
	sc.recovered()
	sc.clock.set(c.Now)
	log := sc.log.With().Time("scheduled_at", at).Logger()
	switch {
	case c.Lease != nil:
		return 0, true, sc.run(c, at, log)
	case c.Outcome != "":
		sc.last = at
		ev := log.Debug()
		if (c.Outcome == lease.OutcomeSkipped || c.Outcome == lease.OutcomePaused) && c.By != "" {
			ev = log.Info()
		}
		ev.Str("claim", c.Outcome).Str("by", c.By).Msg(claimMessages[c.Outcome])
		return 0, true, nil
	case at.After(sc.clock.now()):
		// Not due yet on the database's clock.
		return at.Sub(sc.clock.now()), false, nil
	case c.Held != nil:
		log.Debug().Str("current_holder", c.Held.Holder).Msg("a late time waits: the lease is held")
		// Look again when the lease would expire (at least the retry
		// interval on), or at the next time if that comes first.
		next := max(o.sched.Next(sc.clock.now()).Sub(sc.clock.now()), time.Millisecond)
		return min(next, max(c.Held.ExpiresIn, o.timings.RetryInterval)), false, nil //nolint:nilerr // a held lease is no failure: the time waits
	}
	// Another instance took the lease after the statement's snapshot: ask
	// again, now that its take has committed.
	return 0, false, nil
}

// claimMessages say how a scheduled time was accounted for elsewhere.
var claimMessages = map[string]string{
	lease.ClaimRun:         "skipped: another instance ran this time",
	lease.ClaimManual:      "skipped: this time was run by hand",
	lease.ClaimedElsewhere: "skipped: another instance accounted for this time",
	lease.OutcomeMissed:    "skipped: this time was recorded as missed",
	lease.OutcomeSkipped:   "skipped: the previous run still held the lease at this time",
	lease.OutcomePaused:    "skipped: the job is paused (leasewrap resume ends it)",
}

// run runs the command for the time at under the lease c took, then
// records the times that came due while it held the lease as skipped.
func (sc *scheduler) run(c lease.Claim, at time.Time, log zerolog.Logger) error {
	taken := sc.clock.now() // c.Now, as take set the clock to it
	sc.mon.Leading(c.Lease)
	err := sc.runLease(c.Lease)
	sc.mon.NotLeading()
	held := sc.heldUntil(c.Lease)
	sc.last = at
	sc.runs++
	sc.ran = err
	if sc.w.endSignal != nil {
		if err == nil {
			err = &stopSignal{sc.w.endSignal}
		}
		return err
	}
	if err != nil {
		log.Warn().Err(err).Msg("the scheduled run failed")
	}
	// Times that came due while the run held the lease are skipped: runs
	// of one job never overlap. Not after a late time with more owed
	// behind it (a catch-up): the times after those are late too, and the
	// next step accounts for them all in order, as --catch-up says;
	// recording them now would move last past the times still owed.
	// Times after the lease ended (a wrapper frozen past its deadline)
	// found no holder: they are late, not skipped, and the next step's
	// plan decides them. With --once, those after its start are the next
	// crontab line's.
	var during []lease.Missed
	if sc.w.o.sched.Next(at).After(taken) {
		for _, t := range sc.w.o.sched.Between(cmdutil.MaxTime(at, taken), cmdutil.MinTime(held, sc.planNow()), schedule.DefaultMaxRuns) {
			during = append(during, lease.Missed{At: t})
		}
	}
	if len(during) > 0 {
		if err := sc.record(context.Background(), lease.OutcomeSkipped, during, int64(len(during))); err != nil {
			if errors.As(err, new(*stopSignal)) {
				return err
			}
			log.Warn().Err(err).Msg("cannot record the times skipped during the run; the next step records them")
		}
	}
	// Claims are kept as long as the runs (a pruned time stays accounted
	// for: the job's mark covers it), and at least the catch-up window, so
	// that status and check still show how each time in it went.
	keep := max(sc.w.o.historyKeep, sc.w.o.catchUp.Window)
	if sc.w.o.historyKeep == 0 {
		keep = 0
	}
	if err := sc.w.store.PruneClaims(context.Background(), sc.w.o.job, keep); err != nil {
		log.Debug().Err(err).Msg("cannot prune old claims")
	}
	return nil
}

// heldUntil is when l, handed back, last held its job, on the database's
// clock: its local deadline (never later than the database's expiry),
// which the release moved back to the moment of release.
func (sc *scheduler) heldUntil(l *lease.Lease) time.Time {
	return sc.clock.now().Add(min(l.Remaining(), 0))
}

// failed logs a database failure (once until it recovers) and says to
// try again after the retry interval.
func (sc *scheduler) failed(err error) (time.Duration, error) {
	var stop *stopSignal
	if errors.As(err, &stop) {
		return 0, err
	}
	if errors.Is(err, lease.ErrNotLeaseTable) || errors.Is(err, lease.ErrClaimsUnavailable) {
		return 0, sc.w.db.Unavailable(err, sc.log)
	}
	if sc.w.o.once {
		return 0, sc.w.db.Unavailable(err, sc.log)
	}
	if awaitable(err) {
		sc.mon.Unreachable(err)
	}
	denied := errors.Is(err, lease.ErrPermission)
	ev := sc.log.Debug()
	if !sc.failing && !(denied && sc.deniedSaid) {
		ev = sc.log.Warn()
	}
	sc.failing, sc.denied, sc.deniedSaid = true, denied, sc.deniedSaid || denied
	ev.Err(err).Stringer("retry_in", sc.w.o.timings.RetryInterval).Msg("cannot use the lease store; the scheduled times are accounted for once it answers")
	return sc.w.o.timings.RetryInterval, nil
}

func (sc *scheduler) recovered() {
	if sc.failing {
		sc.failing = false
		if !sc.denied {
			sc.log.Info().Msg("the lease store answers again")
		}
	}
}

// sleep waits d (at most maxIdleWait), or until a signal asks leasewrap to
// end, which it returns.
func (sc *scheduler) sleep(d time.Duration) os.Signal {
	t := time.NewTimer(min(max(d, time.Millisecond), maxIdleWait, sc.w.o.timings.TTL))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-sc.requests.Woken():
			return nil
		case sig := <-sc.w.sigs:
			if signals.Ends(sig) {
				return sig
			}
			sc.log.Debug().Str("signal", sig.String()).Msg("ignoring signal: no run under way")
		}
	}
}

// exit is the exit status of a scheduler that stops: stop's, or with
// --once the run's (the skip status when the time was run elsewhere).
func (sc *scheduler) exit(stop error) error {
	var sig *stopSignal
	if errors.As(stop, &sig) {
		return sc.stopped(sig.sig)
	}
	if stop != nil {
		return stop
	}
	if sc.runs > 0 {
		return sc.ran
	}
	if sc.w.o.once && sc.due.IsZero() {
		sc.notDue()
	} else {
		sc.log.Info().Msg("nothing to run: the time due was run, skipped or missed elsewhere, or none is due")
	}
	return cmdutil.ExitWith(sc.w.o.skipExitCode)
}

// notDue says why a --once found no time just due: it started more than
// the grace after the latest time and more than schedule.DefaultEarly
// before the next, so the crontab line does not fire at the schedule's
// times (another time, another zone), or fired very late, or was run by
// hand.
func (sc *scheduler) notDue() {
	s := sc.w.o.sched
	ev := sc.log.Warn().Str("zone", s.Location().String())
	if prev := s.Prev(sc.until, 366*24*time.Hour); !prev.IsZero() {
		ev = ev.Time("latest", prev).Stringer("late_by", sc.until.Sub(prev).Round(time.Second)).
			Stringer("lateness_bound", s.Bound(prev, schedule.DefaultGrace))
	}
	if next := s.Next(sc.until); !next.IsZero() {
		ev = ev.Time("next", next).Stringer("early_bound", s.Bound(next, schedule.DefaultEarly))
	}
	ev.Msg("nothing to run: no scheduled time is just due (--once runs the latest time when it is less than the lateness bound late, " +
		"or waits for the next when it is within the early bound); does the crontab line fire at the times of --schedule, in its zone?")
}

// stopped ends a scheduler asked to stop by sig between runs: it has
// nothing to hand back, and exits 0 (during a run, the run's status).
func (sc *scheduler) stopped(sig os.Signal) error {
	if sc.w.endSignal != nil {
		return sc.ran
	}
	sc.log.Info().Str("signal", sig.String()).Msg("scheduler stopped by signal")
	return nil
}
