package wrap

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/runner"
	"github.com/redbite/leasewrap/signals"
)

// retryDelay is the wait before retry n (1 for the first): --retry-delay,
// doubled each time, at most maxRetryDelay.
func retryDelay(first time.Duration, n int) time.Duration {
	d := first
	for range n - 1 {
		if d >= cmdutil.MaxRetryDelay/2 {
			return cmdutil.MaxRetryDelay
		}
		d *= 2
	}
	return min(d, cmdutil.MaxRetryDelay)
}

// nextStep is what follows an attempt.
type nextStep struct {
	kind stepKind
	// lost is why the lease ended (stepLost, stepLostUnrecorded).
	lost error
	// signal is the signal to end leasewrap that came during the wait
	// (stepSignalled).
	signal os.Signal
}

// stepKind says what follows an attempt. Its zero value is no step: every
// step names itself.
type stepKind int

const (
	// stepEnd: no retry; the attempt's end is the run's, recorded as usual.
	stepEnd stepKind = iota + 1
	// stepRetry: run the command again; the attempt is in the history.
	stepRetry
	// stepLost: the lease ended in the wait; the attempt is in the history.
	stepLost
	// stepLostUnrecorded: the lease was found lost when recording the
	// attempt, which is not in the history.
	stepLostUnrecorded
	// stepSignalled: a signal to end leasewrap came in the wait; the
	// attempt is in the history.
	stepSignalled
)

// between reports whether the run ends between attempts, with no attempt
// running: for a lost lease or a signal.
func (n nextStep) between() bool {
	return n.kind == stepLost || n.kind == stepLostUnrecorded || n.kind == stepSignalled
}

// recorded reports whether the last attempt is in the history already.
func (n nextStep) recorded() bool {
	return n.kind == stepRetry || n.kind == stepLost || n.kind == stepSignalled
}

// retryAfter decides whether the command runs again after attempt, and
// waits for it while the lease is kept, so no other instance starts in
// between. A success, a command that cannot start, a lost lease and a signal
// to end leasewrap all end the retries. The next attempt starts only once
// the statement that marks its start has renewed the lease: a lease
// released, taken over or deleted during the wait is lost, and a database
// that cannot say so is asked again until the lease would have to stop.
func (w *wrapper) retryAfter(res runner.Result, attempt int, l *lease.Lease, log zerolog.Logger) nextStep {
	failed := res.Status != 0 || res.TimedOut
	if !failed || !res.Started || res.Lost != nil || res.Signal != nil || attempt > w.o.retries {
		return nextStep{kind: stepEnd}
	}
	end := lease.End{ExitCode: recordedStatus(res), Outcome: runOutcome(res), Attempt: attempt, Output: w.kept}
	if err := l.RecordAttempt(context.Background(), end); errors.Is(err, lease.ErrLost) {
		return notRetrying(nextStep{kind: stepLostUnrecorded, lost: err}, log)
	} else if err != nil {
		log.Warn().Err(err).Msg("cannot record the attempt in the history")
	}
	delay := retryDelay(w.o.retryDelay, attempt)
	log.Warn().Int("attempt", attempt).Int("attempts", w.o.retries+1).Int("status", res.Status).
		Bool("timed_out", res.TimedOut).Stringer("retry_in", delay).Msg("the command failed; running it again, keeping the lease")
	t := time.NewTimer(delay)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-t.C:
			err := l.StartAttempt(context.Background())
			if err == nil {
				return nextStep{kind: stepRetry}
			}
			if errors.Is(err, lease.ErrLost) {
				return notRetrying(nextStep{kind: stepLost, lost: err}, log)
			}
			if !warned {
				warned = true
				log.Warn().Err(err).Stringer("remaining", l.Remaining().Round(time.Millisecond)).
					Msg("cannot confirm the lease to start the next attempt; trying again")
			}
			t.Reset(w.o.timings.RetryInterval)
		case <-l.Done():
			return notRetrying(nextStep{kind: stepLost, lost: l.Err()}, log)
		case sig := <-w.sigs:
			if signals.Ends(sig) {
				log.Info().Str("signal", sig.String()).Msg("not retrying: stopped by signal")
				return nextStep{kind: stepSignalled, signal: sig}
			}
		}
	}
}

// notRetrying says why a lost lease ends the retries, at the level of the
// "lease lost" line before it: an operator's release is planned.
func notRetrying(next nextStep, log zerolog.Logger) nextStep {
	ev := log.Error()
	if errors.Is(next.lost, lease.ErrReleasedByOperator) {
		ev = log.Warn()
	}
	ev.Err(next.lost).Msg("not retrying: lease can no longer be guaranteed")
	return next
}

// endBetweenAttempts ends a run whose retries a lost lease or a signal
// ended while no attempt ran. A lost lease exits 75, as when it is lost
// while the command runs, and the history gets one more row for the run:
// the attempt that never started (or the one that could not be recorded)
// as lost, or stopped for an operator's release. A signal exits 128+N, as
// a signal before the first attempt does: the retries the operator asked
// for did not all run, and the last attempt's failure is in the history.
func (w *wrapper) endBetweenAttempts(l *lease.Lease, res runner.Result, attempt int, next nextStep, pings *runPings, log zerolog.Logger) error {
	code := cmdutil.ExitLeaseLost
	if next.kind == stepSignalled {
		code = cmdutil.ExitSignalBase + signals.Number(next.signal)
	}
	pings.finish(code)
	// The attempt is in the history already, or will be by RecordLost:
	// the release records nothing.
	relErr := l.Finish(context.Background(), releaseOnly(res, attempt))
	w.logFinish(relErr, log)
	if next.kind == stepSignalled {
		return cmdutil.ExitWith(code)
	}
	run := lease.End{Outcome: runOutcome(runner.Result{Lost: next.lost}), Attempt: attempt + 1}
	if !next.recorded() {
		run.Attempt, run.ExitCode, run.Output = attempt, recordedStatus(res), w.kept
	}
	// A release that failed for another reason leaves the row as it was:
	// a run it marks started is closed by the next holder, not here.
	if relErr == nil || errors.Is(relErr, lease.ErrLost) {
		if err := l.RecordLost(context.Background(), run); err != nil {
			log.Warn().Err(err).Msg("cannot record the run in the history")
		}
	}
	return cmdutil.ExitWith(code)
}

// releaseOnly is the End of a release that records nothing in the history
// (lease.End's empty Outcome): the run is recorded apart.
func releaseOnly(res runner.Result, attempt int) lease.End {
	return lease.End{ExitCode: recordedStatus(res), Attempt: attempt}
}
