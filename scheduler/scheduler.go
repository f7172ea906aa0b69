package scheduler

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
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
	cfg Config
	log zerolog.Logger
	// clock estimates the database's clock between answers.
	clock planClock
	// last is the latest scheduled time this instance knows accounted for
	// (run, missed or skipped, by any instance), with every time before it.
	last time.Time
	// runs counts the runs of this instance, and ran is the latest one's
	// exit status as an error, for --once's.
	runs int
	ran  error
	// ended is the signal to end leasewrap that stopped the last run, if
	// one did: the scheduler ends with it.
	ended os.Signal
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
// switches the job with leasewrap reschedule. A --once line refuses (a
// *RefusedError).
//
// A scheduler is a service: one that cannot reach the database, or finds
// it taking no writes (a restart, a failover under way), stands by for it
// as a --wait standby does (Host.Reach), until Config.WaitTimeout
// (ErrWaitTimeout) if given; a Deployment of schedulers must not
// crash-loop through a database restart. A database that refuses it for
// good (no such database, a failed password), and any failure of a --once
// line, end it (an *UnavailableError).
func (sc *scheduler) register(ctx context.Context) (lease.Registration, error) {
	cfg := sc.cfg
	standing := false
	// --wait-timeout bounds the standing by for the database, from the
	// first time it could not be reached: not a wait for the job's
	// schedule to become this instance's, nor a slow registration.
	var giveUpAt time.Time
	for {
		cfg.Monitor.Turned()
		var reg lease.Registration
		sig, err := cfg.Host.WatchSignals(ctx, func(ctx context.Context) error {
			var err error
			reg, err = cfg.Store.Register(ctx, cfg.Job, cfg.Schedule.Spec(), cfg.Schedule.ZoneRules)
			if !lease.Awaitable(err) || cfg.Once {
				return err
			}
			if cfg.WaitTimeout > 0 {
				if giveUpAt.IsZero() {
					giveUpAt = time.Now().Add(cfg.WaitTimeout)
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadlineCause(ctx, giveUpAt, ErrWaitTimeout)
				defer cancel()
			}
			if err = cfg.Host.Reach(ctx, err); err == nil {
				return errReached
			}
			return err
		})
		if sig != nil {
			return reg, &stopSignal{sig}
		}
		var se *lease.ScheduleError
		switch {
		case errors.Is(err, errReached):
			continue
		case errors.Is(err, ErrWaitTimeout):
			return reg, ErrWaitTimeout
		case errors.As(err, &se) && cfg.Once:
			return reg, &RefusedError{Err: err}
		case errors.As(err, &se):
			if !standing {
				sc.log.Warn().Err(cfg.Host.Advised(err)).Str("reschedule", cfg.Host.Reschedule(cfg.Job, cfg.Schedule.Spec())).
					Msg("standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")
				standing = true
			}
			if sig := sc.sleep(cfg.Timings.RetryInterval); sig != nil {
				return reg, &stopSignal{sig}
			}
			continue
		case err != nil:
			return reg, &UnavailableError{Err: err, Log: cfg.Log}
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
	cfg := sc.cfg
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
	if cfg.Once {
		sc.onceAt(reg.Now)
	}
	sc.last = sc.start(reg)
	next := cfg.Schedule.Next(sc.last)
	if !cfg.Once {
		// Requests to run now (leasewrap trigger, manual.go) made before
		// it listened are looked for first: once started, an idle
		// scheduler sends no statement.
		sc.requests = cfg.Store.WatchRequests(ctx, cfg.Job)
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
		cfg.Monitor.Turned()
		wait, stop := sc.step(ctx)
		if stop == nil && !cfg.Once {
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

// newScheduler is a scheduler of cfg planning on clock.
func newScheduler(cfg Config, clock planClock) *scheduler {
	return &scheduler{cfg: cfg, clock: clock, log: cfg.Log.With().Str("schedule", cfg.Schedule.Spec()).Logger()}
}

// start is the time a scheduler accounts from: the job's latest claim,
// else (a job never scheduled) just before the latest due time when
// that one is still on time (with --once: just before the time just due),
// else now. A new job owes nothing from before it was first started.
func (sc *scheduler) start(reg lease.Registration) time.Time {
	if !reg.Latest.IsZero() {
		return reg.Latest
	}
	s, now := sc.cfg.Schedule, reg.Now
	if sc.cfg.Once {
		if !sc.due.IsZero() && !sc.due.After(now) {
			return sc.due.Add(-time.Nanosecond)
		}
		return now
	}
	p := s.Plan(time.Time{}, now, schedule.CatchUp{Policy: schedule.CatchUpLatest, Window: sc.cfg.CatchUp.Window, MaxMissed: 1})
	if len(p.Run) == 0 {
		return now
	}
	latest := p.Run[len(p.Run)-1]
	before := latest.Add(-time.Nanosecond)
	if sc.cfg.Once || len(s.Plan(before, now, schedule.CatchUp{Policy: schedule.CatchUpNone}).Run) > 0 {
		return before
	}
	return latest
}

// step accounts for the times due by now: it records the missed ones and
// runs (or finds claimed) the ones to run, in order. It returns how long
// to wait before the next step, or the error to end with.
func (sc *scheduler) step(ctx context.Context) (time.Duration, error) {
	s := sc.cfg.Schedule
	plan := s.Plan(sc.last, sc.planNow(), sc.catchUp())
	if missed, count := missedOf(plan); len(missed) > 0 {
		if err := sc.record(ctx, lease.OutcomeMissed, missed, count); err != nil {
			return sc.failed(err)
		}
	}
	for i, at := range plan.Run {
		// The newest time, when nothing is due after it, is the one due
		// now: a lease held then means the previous run still goes, and
		// the time is skipped. An older one waits for the holder.
		latest := i == len(plan.Run)-1 && s.Next(at).After(sc.planNow())
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
	if due, ok := sc.cfg.Schedule.JustDue(now, schedule.DefaultGrace, schedule.DefaultEarly); ok {
		sc.due = due
		sc.until = timefmt.Later(now, due)
	}
}

// onceDone reports that a --once is done, its next step having to wait
// for a later time than the one it was started for. It goes on while
// there is more to do at once (a take to ask again) or while the time
// just due is still to come.
func (sc *scheduler) onceDone(wait time.Duration) bool {
	return sc.cfg.Once && wait > 0 && sc.cfg.Schedule.Next(sc.last).After(sc.until)
}

// catchUp is the catch-up policy the plans use. A --once line runs only
// the time just due (the latest, when less than the grace late), as cron
// runs no time it did not fire for: it records older ones missed, as
// --catch-up none does.
func (sc *scheduler) catchUp() schedule.CatchUp {
	c := sc.cfg.CatchUp
	if sc.cfg.Once {
		c.Policy = schedule.CatchUpNone
	}
	return c
}

// untilNext is how long until the next scheduled time, on the database's
// clock (0 when one is due already; with --once, due by its start).
func (sc *scheduler) untilNext() time.Duration {
	return max(sc.cfg.Schedule.Next(sc.last).Sub(sc.planNow()), 0)
}

// planNow is the database's time as far as planning goes: with --once, no
// later than its start.
func (sc *scheduler) planNow() time.Time {
	now := sc.clock.now()
	if sc.cfg.Once && now.After(sc.until) {
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
	sig, err := sc.cfg.Host.WatchSignals(ctx, func(ctx context.Context) error {
		var err error
		n, now, latest, err = sc.cfg.Store.RecordMissed(ctx, sc.cfg.Job, outcome, times)
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
	cfg := sc.cfg
	var c lease.Claim
	sig, err := cfg.Host.WatchSignals(ctx, func(ctx context.Context) error {
		var err error
		c, err = cfg.Store.TakeScheduled(ctx, cfg.Job, cfg.Schedule.Spec(), at, latest)
		return err
	})
	if sig != nil {
		if c.Lease != nil {
			cfg.Host.Abandon(c.Lease, sig, sc.log)
		}
		return 0, false, &stopSignal{sig}
	}
	var (
		se       *lease.ScheduleError
		slotsErr *lease.SlotsError
	)
	switch {
	case errors.As(err, &se) && !cfg.Once:
		sc.log.Warn().Err(sc.cfg.Host.Advised(err)).Msg("the job's schedule changed under this scheduler")
		return 0, false, errScheduleChanged
	case errors.As(err, &se), errors.As(err, &slotsErr):
		return 0, false, &RefusedError{Err: err}
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
		next := max(cfg.Schedule.Next(sc.clock.now()).Sub(sc.clock.now()), time.Millisecond)
		return min(next, max(c.Held.ExpiresIn, cfg.Timings.RetryInterval)), false, nil //nolint:nilerr // a held lease is no failure: the time waits
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
	sc.cfg.Monitor.Leading(c.Lease)
	ended, err := sc.cfg.Host.RunLease(c.Lease)
	sc.cfg.Monitor.NotLeading()
	held := sc.heldUntil(c.Lease)
	sc.last = at
	sc.runs++
	sc.ran, sc.ended = err, ended
	if sc.ended != nil {
		if err == nil {
			err = &stopSignal{sc.ended}
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
	if sc.cfg.Schedule.Next(at).After(taken) {
		for _, t := range sc.cfg.Schedule.Between(timefmt.Later(at, taken), timefmt.Earlier(held, sc.planNow()), schedule.DefaultMaxRuns) {
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
	keep := max(sc.cfg.HistoryKeep, sc.cfg.CatchUp.Window)
	if sc.cfg.HistoryKeep == 0 {
		keep = 0
	}
	if err := sc.cfg.Store.PruneClaims(context.Background(), sc.cfg.Job, keep); err != nil {
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
		return 0, &UnavailableError{Err: err, Log: sc.log}
	}
	if sc.cfg.Once {
		return 0, &UnavailableError{Err: err, Log: sc.log}
	}
	if lease.Awaitable(err) {
		sc.cfg.Monitor.Unreachable(err)
	}
	denied := errors.Is(err, lease.ErrPermission)
	ev := sc.log.Debug()
	if !sc.failing && !(denied && sc.deniedSaid) {
		ev = sc.log.Warn()
	}
	sc.failing, sc.denied, sc.deniedSaid = true, denied, sc.deniedSaid || denied
	ev.Err(err).Stringer("retry_in", sc.cfg.Timings.RetryInterval).Msg("cannot use the lease store; the scheduled times are accounted for once it answers")
	return sc.cfg.Timings.RetryInterval, nil
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
	t := time.NewTimer(min(max(d, time.Millisecond), maxIdleWait, sc.cfg.Timings.TTL))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-sc.requests.Woken():
			return nil
		case sig := <-sc.cfg.Signals:
			if signals.Ends(sig) {
				return sig
			}
			sc.log.Debug().Str("signal", sig.String()).Msg("ignoring signal: no run under way")
		}
	}
}

// exit is what a scheduler that stops ends with: stop, or with --once the
// run's status (ErrNothingRun when it ran nothing).
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
	if sc.cfg.Once && sc.due.IsZero() {
		sc.notDue()
	} else {
		sc.log.Info().Msg("nothing to run: the time due was run, skipped or missed elsewhere, or none is due")
	}
	return ErrNothingRun
}

// notDue says why a --once found no time just due: it started more than
// the grace after the latest time and more than schedule.DefaultEarly
// before the next, so the crontab line does not fire at the schedule's
// times (another time, another zone), or fired very late, or was run by
// hand.
func (sc *scheduler) notDue() {
	s := sc.cfg.Schedule
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
// nothing to hand back, and ends with nil (during a run, with the run's
// status).
func (sc *scheduler) stopped(sig os.Signal) error {
	if sc.ended != nil {
		return sc.ran
	}
	sc.log.Info().Str("signal", sig.String()).Msg("scheduler stopped by signal")
	return nil
}
