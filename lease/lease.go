package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/pgerr"
)

// maxSleep bounds every wait of the keeper, so that a timer that stood still
// while the machine was suspended (Go timers run on a clock that does not
// count suspension) is corrected soon after waking.
const maxSleep = 250 * time.Millisecond

// ReleaseTimeout bounds the statement that hands a lease back. A release that
// fails is harmless: the lease expires after its TTL.
const ReleaseTimeout = 5 * time.Second

// releaseRetryInterval spaces the attempts of a release that failed for a
// reason that may pass.
const releaseRetryInterval = 100 * time.Millisecond

// Lease is one holder's hold on one job. While it is held a goroutine renews
// it every renew interval (retrying failures every retry interval). Done is
// closed the moment leadership can no longer be guaranteed: the lease was
// lost, no renewal succeeded by grace + safety margin before the local
// deadline, or it was released. Work must stop then.
type Lease struct {
	store *Store
	job   string
	token int64
	// row is the lease row's name: the job, or job#slot (see SlotRow).
	row  string
	slot int
	// scheduledAt is the scheduled time the lease was taken for (zero:
	// not a scheduled run); the history records it with the run.
	scheduledAt time.Time

	mu       sync.Mutex
	deadline time.Duration // local clock; never later than the database's expiry
	err      error

	done       chan struct{}
	stopKeeper context.CancelFunc
	keeperDone chan struct{}
	// renewAsked is set (under mu) when the keeper is to renew now, not
	// at its time (see watchStopRequests); wakeKeeper ends its sleep
	// meanwhile.
	renewAsked bool
	wakeKeeper context.CancelFunc

	// warming is closed when the warm-up (WarmRelease) ends or is called
	// off; it is set by the first WarmRelease or by the release, which
	// waits for it. warmTimer starts the warm-up.
	warming   chan struct{}
	warmTimer *time.Timer

	releaseOnce sync.Once
	releaseErr  error
}

func newLease(s *Store, job string, token int64, deadline time.Duration) *Lease {
	return newSlotLease(s, job, 1, token, deadline)
}

func newSlotLease(s *Store, job string, slot int, token int64, deadline time.Duration) *Lease {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Lease{
		store:      s,
		job:        job,
		row:        SlotRow(job, slot),
		slot:       slot,
		token:      token,
		deadline:   deadline,
		done:       make(chan struct{}),
		stopKeeper: cancel,
		keeperDone: make(chan struct{}),
	}
	go l.keep(ctx)
	return l
}

// Job returns the lease's job name.
func (l *Lease) Job() string { return l.job }

// Slot returns which of the job's slots this lease is (1 for a job with
// one slot).
func (l *Lease) Slot() int { return l.slot }

// Row returns the lease row's name: the job for slot 1, "job#N" for slot
// N. leasewrap_check takes it as its job argument.
func (l *Lease) Row() string { return l.row }

// Token returns the fencing token: greatest(previous + 1, the database clock
// in microseconds) at acquisition, so it rises with every acquisition of the
// job and never repeats, and a store that sees a write with an older token
// can reject it.
func (l *Lease) Token() int64 { return l.token }

// Done is closed when leadership can no longer be guaranteed.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err says why Done was closed: an error wrapping ErrLost, or ErrReleased.
// It is nil while Done is open.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Remaining returns how long the lease is certainly still valid, measured on
// a local clock that counts suspended time from before the last successful
// statement was sent. It is never longer than the database's own view.
func (l *Lease) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline - l.store.cfg.clock.Now()
}

// Grace is how long work gets between being told to stop (Done closing) and
// being killed.
func (l *Lease) Grace() time.Duration { return l.store.cfg.Grace }

// KillIn is how long until work must be dead, whatever the grace: the
// remaining lease less the safety margin. It is the last moment to send
// SIGKILL; negative once that moment has passed.
func (l *Lease) KillIn() time.Duration { return l.Remaining() - SafetyMargin(l.store.cfg.TTL) }

// end closes Done once, with err as the reason, and reports whether this
// call closed it.
func (l *Lease) end(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	close(l.done)
	return true
}

// logger is the lease's own log context.
func (l *Lease) logger() zerolog.Logger {
	return l.store.log.With().Str("job", l.job).Int64("fencing_token", l.token).Logger()
}

// renewTimeout bounds one renewal statement below the moment work has to
// stop, but not below a round trip a loaded database can need, or a short
// renew interval would time out every renewal.
const renewTimeout = time.Second

// keep renews the lease until it is released or leadership is in doubt.
func (l *Lease) keep(ctx context.Context) {
	defer close(l.keeperDone)
	// Listening for a release ends with the keeper: a lease lost or
	// released has nothing more to hear.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go l.watchStopRequests(wctx)
	cfg := l.store.cfg
	log := l.logger()
	// The first renewal is due a renew interval after the acquiring
	// statement was sent, not after this goroutine started.
	l.mu.Lock()
	nextRenew := l.deadline - cfg.TTL + cfg.RenewInterval
	l.mu.Unlock()
	for {
		stopIn := l.Remaining() - cfg.StopBefore()
		if stopIn <= 0 {
			l.lose(fmt.Errorf("lease %q: no renewal succeeded in time: %w", l.job, ErrLost), log)
			return
		}
		// A request is taken even when a renewal is due anyway: it would
		// bring another right after this one.
		asked := l.renewing()
		if renewIn := nextRenew - cfg.clock.Now(); renewIn > 0 && !asked {
			if l.sleep(ctx, min(renewIn, stopIn, maxSleep)) != nil {
				return
			}
			continue
		}
		// A renewal may not run past the moment work has to stop.
		rctx, cancel := context.WithTimeout(ctx, min(stopIn, max(cfg.RenewInterval, renewTimeout)))
		began := cfg.clock.Now()
		err := l.renew(rctx)
		cancel()
		if ctx.Err() == nil {
			cfg.observer.Renewed(cfg.clock.Now()-began, err)
		}
		switch {
		case err == nil:
			nextRenew = cfg.clock.Now() + jitter(cfg.RenewInterval)
			log.Debug().Stringer("remaining", l.Remaining().Round(time.Millisecond)).Msg("renewed")
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrLost):
			l.lose(err, log)
			return
		default:
			nextRenew = cfg.clock.Now() + jitter(cfg.RetryInterval)
			log.Warn().Err(err).Str("next", l.retrying()).Stringer("remaining", l.Remaining().Round(time.Millisecond)).Msg("renewal failed")
		}
	}
}

// retrying says what follows a failed renewal: another every retry
// interval, and the lease given up when none has succeeded by the moment
// work has to stop.
func (l *Lease) retrying() string {
	cfg := l.store.cfg
	left := (l.Remaining() - cfg.StopBefore()).Round(time.Millisecond)
	if left <= 0 {
		return "no time is left for another: the lease is given up and the work under it stopped"
	}
	return fmt.Sprintf("retrying every %s; if none succeeds within %s, the lease is given up and the work under it stopped",
		cfg.RetryInterval, left)
}

// lose ends the lease because leadership can no longer be guaranteed, and
// says why at the level the reason deserves: an operator's release is
// planned, everything else is an incident. The keeper and a retry's start
// may both find the loss: only the first says so.
func (l *Lease) lose(err error, log zerolog.Logger) {
	if !l.end(err) { // before logging: a log write may block or fail
		return
	}
	l.store.cfg.observer.Lost(err)
	ev := log.Error()
	if errors.Is(err, ErrReleasedByOperator) {
		ev = log.Warn()
	}
	ev.Err(err).Stringer("remaining", l.Remaining().Round(time.Millisecond)).Msg("lease lost")
}

// renew extends the lease by the TTL if it is still this holder's under the
// same token. It returns an error wrapping ErrLost if not (ErrRowRegressed
// or ErrReleasedByOperator when that is why), and other errors when the
// database could not say; the statement never outlives the local deadline.
func (l *Lease) renew(ctx context.Context) error {
	s := l.store
	return l.extend(ctx, s.sql.renewCall, s.sql.renew, "renew lease")
}

// extend runs query (through call, see Store.hot), a renewal with renew's parameters (@row, @holder,
// @token, @ttl) and answer (renewed, and the row as it was), and moves
// the local deadline to t0 + TTL on success, t0 read before the statement
// was sent. what names the action in errors.
func (l *Lease) extend(ctx context.Context, call, query, what string) error {
	s := l.store
	t0 := s.cfg.clock.Now()
	remaining := l.Remaining()
	if remaining <= 0 {
		return fmt.Errorf("cannot %s %q: %w (expired locally)", what, l.job, ErrLost)
	}
	ctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	bound, _ := ctx.Deadline()
	within := time.Until(bound)
	var r renewal
	db, done := s.replicaDB(s.db)
	defer done()
	send := func() error {
		return s.hot(call, query, func(query string) error {
			return queryRow(ctx, db, query, pgx.StrictNamedArgs{"row": l.row, "holder": s.cfg.holder, "token": l.token, "ttl": s.cfg.TTL.Microseconds()}, into(&r))
		})
	}
	err := send()
	if connectionLost(err) && ctx.Err() == nil {
		// The pool does not ping idle connections (see Connect): one that
		// broke while idle fails here once, and the pool dials a fresh one.
		// Sending the renewal twice is harmless: it is conditional on the
		// holder and token, and t0 is from before the first.
		err = send()
	}
	if err == nil && !r.Renewed && r.Token != nil && *r.Token == l.token && *r.Holder == s.cfg.holder && !r.Released {
		// The row changed while the UPDATE waited for it (an operator's
		// release committing, say): the UPDATE saw the new row, the SELECT
		// still shows the statement's snapshot. A second statement sees
		// what changed; it cannot renew a lease the first found changed.
		err = send()
	}
	if err != nil {
		err = fmt.Errorf("cannot %s %q: %w", what, l.job, pgerr.Classify(noAnswer(ctx, err, within)))
		s.cfg.observer.Failed(err)
		return err
	}
	s.cfg.observer.Contacted()
	if !r.Renewed {
		return l.notRenewed(what, r)
	}
	// Under WithRequireReplicated, only once the standbys have it.
	if err := s.replayed(ctx, db, l); err != nil {
		return err
	}
	// The keeper and a retry's start may both renew: a later answer to
	// an earlier statement must not move the deadline back.
	l.mu.Lock()
	l.deadline = max(l.deadline, t0+s.cfg.TTL)
	l.mu.Unlock()
	return nil
}

// renewal is a renewal's answer: whether it renewed, and the row as the
// statement's snapshot saw it (nil when the row is gone).
type renewal struct {
	Renewed  bool
	Token    *int64
	Holder   *string
	Released bool
}

// notRenewed says why a renewal that renewed nothing lost the lease.
func (l *Lease) notRenewed(what string, r renewal) error {
	holder := l.store.cfg.holder
	switch {
	case r.Token == nil || *r.Token < l.token:
		return fmt.Errorf("cannot %s %q with token %d: %w", what, l.job, l.token, ErrRowRegressed)
	case *r.Token == l.token && *r.Holder == holder && r.Released:
		return fmt.Errorf("cannot %s %q: %w", what, l.job, ErrReleasedByOperator)
	default:
		// This holder's lease was still valid (renewals stop before the local
		// deadline, which is never later than the database's expiry), so no
		// take could have been legitimate.
		return fmt.Errorf("cannot %s %q: %w: taken over by %q with token %d while this holder's lease was valid (an operator's forced release, a write lost in a failover, or a change by hand?)",
			what, l.job, ErrLost, *r.Holder, *r.Token)
	}
}

// Release stops renewing and hands the lease back: the row stays (so the
// token is kept) and expires now, or at acquisition + hold-for if that is
// later. exitCode, when not nil, is recorded as the run's status. Releasing a
// lease that another holder took since changes nothing in the table and
// returns an error wrapping ErrLost. Only the first call acts; later ones
// return its result.
func (l *Lease) Release(ctx context.Context, exitCode *int) error {
	outcome := OutcomeExited
	if l.Err() != nil && !errors.Is(l.Err(), ErrReleased) {
		outcome = OutcomeLost
	}
	return l.Finish(ctx, End{ExitCode: exitCode, Outcome: outcome})
}

// End is how a run ended, for the history: the command's exit status (nil
// when there was none) and one of the Outcome constants.
type End struct {
	ExitCode *int
	Outcome  string
	// Attempt numbers the run's attempts under one lease (--retries),
	// from 1 (0 counts as 1).
	Attempt int
	// Output is what the run kept of its command's output (--keep-output),
	// recorded with it; nil keeps none (an empty slice is an empty output).
	Output []byte
	// Ran is how long the attempt's command ran, and Ended when it ended
	// (zero: at the record), for RecordLost, which has no lease row to
	// read its start from (0: none ran): the release before the record
	// may take a while.
	Ran   time.Duration
	Ended time.Time
	// StoppedBy says who asked for the stop of a run whose Outcome is
	// OutcomeStopped, in words ("SIGTERM to leasewrap"). Empty for an
	// operator's release: the lease row records who asked (see
	// ReleaseHeldBy).
	StoppedBy string
}

// Finish is Release that records the run in the history with end's
// outcome, in the same statement as the release (when the history table
// is there). When the row is no longer this holder's (deleted by an
// operator, or taken), the run is recorded without it (see RecordLost):
// not when a taker closed it already. An empty outcome records nothing.
func (l *Lease) Finish(ctx context.Context, end End) error {
	return l.release(ctx, l.store.cfg.holdFor, end)
}

// RecordAttempt records in the history an attempt that ended while the
// lease is kept for another one (a retry). It does nothing without a
// history table. When the lease row is no longer this holder's (taken
// over, or deleted), nothing is recorded, the lease ends as lost (Done
// closes, as for a failed renewal) and the error wraps ErrLost.
func (l *Lease) RecordAttempt(ctx context.Context, end End) error {
	s := l.store
	if s.hist() == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	args := l.runArgs(end)
	args["row"] = l.row
	tag, err := s.db.Exec(ctx, s.sql.recordAttempt, args)
	if err != nil {
		// Without the history, an attempt is not recorded at all; the next
		// attempt's start still proves the lease.
		if err = s.withoutHistory(ctx, err, func() error { return nil }); err != nil {
			return fmt.Errorf("cannot record attempt %d of lease %q: %w", end.Attempt, l.job, pgerr.Classify(err))
		}
		return nil
	}
	if tag.RowsAffected() == 0 {
		err = fmt.Errorf("cannot record attempt %d of lease %q: %w: the row is gone or another holder's", end.Attempt, l.job, ErrLost)
		l.lose(err, l.logger())
		return err
	}
	return nil
}

// StartAttempt marks the start of the next attempt of the run in the lease
// row (the history takes the attempt's start from it), in a statement that
// renews the lease as the keeper does: the next attempt may start only when
// it returns nil. When the lease is no longer this holder's (released by
// an operator, taken over, deleted) the lease ends as lost, as for a
// failed renewal, and the error wraps ErrLost. Any other error means the
// database could not say: the attempt must not start yet; try again while
// Done is open. The statement never outlives the moment work would have to
// stop.
func (l *Lease) StartAttempt(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	cfg := l.store.cfg
	stopIn := l.Remaining() - cfg.StopBefore()
	if stopIn <= 0 {
		err := fmt.Errorf("lease %q: no renewal succeeded in time: %w", l.job, ErrLost)
		l.lose(err, l.logger())
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, min(stopIn, max(cfg.RenewInterval, renewTimeout)))
	defer cancel()
	err := l.extend(ctx, "", l.store.sql.startAttempt, "start the next attempt of lease")
	if errors.Is(err, ErrLost) {
		l.lose(err, l.logger())
	}
	return err
}

// RecordLost records in the history, as end says, a run whose lease row
// was no longer this holder's when the run ended: the lease ended while no
// command ran (during the wait for a retry, or when recording the attempt
// before it found the row gone), or the release found the row deleted or
// another's (an operator's DELETE, or a take). The run is written without
// the row, once: not if the history already has this attempt (or a later
// one) of this lease, which is how a taker closes a run its holder left
// started. It ended at end.Ended, end.Ran after it started. It does
// nothing without a history table. Call it after Finish, whose release
// (when the row is still this holder's) keeps a taker from closing the run
// too.
func (l *Lease) RecordLost(ctx context.Context, end End) error {
	s := l.store
	if s.hist() == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	args := l.runArgs(end)
	args["ran"], args["ended_ago"] = end.Ran.Microseconds(), int64(0)
	if !end.Ended.IsZero() {
		args["ended_ago"] = time.Since(end.Ended).Microseconds()
	}
	_, err := s.db.Exec(ctx, s.sql.recordLost, args)
	if err != nil {
		return fmt.Errorf("cannot record attempt %d of lease %q: %w", end.Attempt, l.job, pgerr.Classify(err))
	}
	return nil
}

// Abandon hands the lease back at once, without hold-for: for a lease taken
// for work that then never started (a signal came, or the lease came too
// late to be safe). Like Release, only the first of the two calls acts.
func (l *Lease) Abandon(ctx context.Context) error {
	return l.release(ctx, 0, End{})
}

// AbandonWith is Abandon that records the run that never started, with
// end's outcome (OutcomeCouldNotStart) and exit status.
func (l *Lease) AbandonWith(ctx context.Context, end End) error {
	return l.release(ctx, 0, end)
}

func (l *Lease) release(ctx context.Context, holdFor time.Duration, end End) error {
	l.releaseOnce.Do(func() {
		l.stopKeeper()
		l.awaitWarmUp()
		<-l.keeperDone
		l.end(ErrReleased)
		l.mu.Lock()
		l.deadline = min(l.deadline, l.store.cfg.clock.Now())
		l.mu.Unlock()
		l.releaseErr = l.releaseRow(ctx, holdFor, end)
		// The release found no row of this holder's and recorded nothing;
		// a deleted row has no taker to close the run either.
		if errors.Is(l.releaseErr, ErrLost) && end.Outcome != "" {
			if err := l.RecordLost(ctx, end); err != nil {
				log := l.logger()
				log.Warn().Err(err).Msg("cannot record the run in the history")
			}
		}
	})
	return l.releaseErr
}

// warmUpDelay is how long the command runs before WarmRelease plans the
// release: a command that ends sooner would have its release wait for the
// warm-up rather than gain from it, and the warm-up does not share the
// CPU with the command's start.
const warmUpDelay = 50 * time.Millisecond

// warmUpTimeout bounds the statement of WarmRelease, which a release
// waits for.
const warmUpTimeout = time.Second

// WarmRelease plans the lease's release statement once, in the background
// and after warmUpDelay (EXPLAIN: nothing runs, nothing is written), on an
// idle connection of the pool, the one the release then most likely gets.
// A backend plans a statement whose tables and functions it has not used
// yet several times more slowly, and the release, which hands the lease on
// to the next standby, comes between the command's end and the next
// holder's start. Call it once the command runs. Later calls, and calls
// once the release began, do nothing.
func (l *Lease) WarmRelease() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.warming != nil {
		return
	}
	done := make(chan struct{})
	l.warming = done
	l.warmTimer = time.AfterFunc(warmUpDelay, func() {
		defer close(done)
		// A failure changes nothing: the release is planned when it runs.
		if err := l.planRelease(); err != nil {
			log := l.logger()
			log.Debug().Err(pgerr.Classify(err)).Msg("cannot plan the release ahead; it is planned when it runs")
		}
	})
}

// planRelease has the database plan the release statement without
// running it.
func (l *Lease) planRelease() error {
	s := l.store
	ctx, cancel := context.WithTimeout(context.Background(), warmUpTimeout)
	defer cancel()
	query, args := s.releaseArgs(l, s.cfg.holdFor, End{ExitCode: new(int), Outcome: OutcomeExited})
	_, err := s.db.Exec(ctx, "EXPLAIN "+query, args)
	return err
}

// awaitWarmUp calls off a warm-up not yet started (WarmRelease), waits for
// one under way, and keeps one from starting.
func (l *Lease) awaitWarmUp() {
	l.mu.Lock()
	switch {
	case l.warming == nil:
		l.warming = make(chan struct{})
		close(l.warming)
	case l.warmTimer.Stop():
		close(l.warming)
	}
	warming := l.warming
	l.mu.Unlock()
	<-warming
}

// releaseRow runs the release statement, retrying failures that may pass
// until ReleaseTimeout.
func (l *Lease) releaseRow(ctx context.Context, holdFor time.Duration, end End) error {
	s := l.store
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	within := time.Until(deadline)
	query, args := s.releaseArgs(l, holdFor, end)
	for {
		tag, err := s.db.Exec(ctx, query, args)
		if err != nil && query != s.sql.release {
			tag, err = s.releaseWithoutHistory(ctx, err, args)
		}
		switch {
		case err == nil && tag.RowsAffected() == 0:
			return fmt.Errorf("cannot release lease %q: %w", l.job, ErrLost)
		case err == nil:
			return nil
		case !retryable(err) || ctx.Err() != nil:
			return fmt.Errorf("cannot release lease %q: %w", l.job, pgerr.Classify(noAnswer(ctx, err, within)))
		}
		// A connection that broke while the lease was held fails once; the
		// pool dials a fresh one for the next try.
		t := time.NewTimer(releaseRetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("cannot release lease %q: %w", l.job, pgerr.Classify(noAnswer(ctx, err, within)))
		case <-t.C:
		}
	}
}

// releaseArgs is the release statement for the schema found, with its
// named arguments (see releaseSQL and releaseRecordingSQL). Every variant
// takes them all: a statement ignores the names it does not use.
func (s *Store) releaseArgs(l *Lease, holdFor time.Duration, end End) (string, pgx.NamedArgs) {
	args := pgx.NamedArgs(l.runArgs(end))
	args["row"], args["hold_for"], args["keep"] = l.row, holdFor.Microseconds(), s.cfg.historyKeep.Microseconds()
	args["job_channel"], args["table_channel"] = jobChannel(s.channel, l.job), s.channel
	// A scheduled run's lease is not handed on: schedulers do not queue,
	// and each scheduled time is claimed with its own take.
	args["handoff"], args["first"] = l.scheduledAt.IsZero(), FirstExpiry(s.cfg.Timings).Microseconds()
	if h := s.hist(); h != nil {
		return h.release, args
	}
	return s.sql.release, args
}

// runArgs are the named arguments that record l's run as end says (see
// releaseRun, recordAttemptSQL and recordLostSQL): an outcome of "" is
// NULL, no run to record.
func (l *Lease) runArgs(end End) pgx.StrictNamedArgs {
	var outcome *string
	if end.Outcome != "" {
		outcome = &end.Outcome
	}
	var stoppedBy *string
	if end.StoppedBy != "" {
		stoppedBy = &end.StoppedBy
	}
	return pgx.StrictNamedArgs{"job": l.job, "slot": l.slot, "holder": l.store.cfg.holder, "token": l.token,
		"attempt": max(end.Attempt, 1), "exit_code": end.ExitCode, "outcome": outcome, "output": end.Output,
		"scheduled_at": l.scheduledArg(), "stopped_by": stoppedBy}
}

// Do waits for the lease on job, runs fn while holding it, and releases it
// when fn returns. fn's context is cancelled the moment leadership can no
// longer be guaranteed, at least the grace before the lease could expire;
// fn must return promptly then. If the lease was lost, Do's error wraps
// ErrLost (joined with fn's own error).
func (s *Store) Do(ctx context.Context, job string, fn func(ctx context.Context, l *Lease) error) error {
	l, err := s.Acquire(ctx, job)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-l.Done():
			cancel(l.Err())
		case <-fctx.Done():
		}
	}()
	ferr := fn(fctx, l)
	lost := l.Err()
	if relErr := l.Release(context.WithoutCancel(ctx), nil); relErr != nil && lost == nil {
		s.log.Warn().Err(relErr).Str("job", job).Msg("release failed; the lease will expire by itself")
	}
	if lost != nil {
		return errors.Join(ferr, lost)
	}
	return ferr
}
