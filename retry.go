package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/runner"
	"github.com/redbite/leasewrap/signals"
)

// maxRetryDelay caps the doubling of --retry-delay.
const maxRetryDelay = 10 * time.Minute

// retryDelay is the wait before retry n (1 for the first): --retry-delay,
// doubled each time, at most maxRetryDelay.
func retryDelay(first time.Duration, n int) time.Duration {
	d := first
	for range n - 1 {
		if d >= maxRetryDelay/2 {
			return maxRetryDelay
		}
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// retryAfter decides whether the command runs again after attempt, and
// waits for it while the lease is kept, so no other instance starts in
// between. A success, a command that cannot start, a lost lease and a signal
// to end leasewrap all end the retries. recorded reports that the attempt
// is already in the history (the retries ended during the wait).
func (w *wrapper) retryAfter(res runner.Result, attempt int, l *lease.Lease, log zerolog.Logger) (retry, recorded bool) {
	failed := res.Status != 0 || res.TimedOut
	if !failed || !res.Started || res.Lost != nil || res.Signal != nil || attempt > w.o.retries {
		return false, false
	}
	end := lease.End{ExitCode: &res.Status, Outcome: runOutcome(res), Attempt: attempt}
	if err := l.RecordAttempt(context.Background(), end); err != nil {
		log.Warn().Err(err).Msg("cannot record the attempt in the history")
	}
	delay := retryDelay(w.o.retryDelay, attempt)
	log.Warn().Int("attempt", attempt).Int("attempts", w.o.retries+1).Int("status", res.Status).
		Bool("timed_out", res.TimedOut).Stringer("retry_in", delay).Msg("the command failed; running it again, keeping the lease")
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := l.StartAttempt(context.Background()); err != nil {
				log.Warn().Err(err).Msg("cannot record the next attempt's start")
			}
			return true, true
		case <-l.Done():
			log.Error().Err(l.Err()).Msg("not retrying: lease can no longer be guaranteed")
			return false, true
		case sig := <-w.sigs:
			if signals.Ends(sig) {
				log.Info().Str("signal", sig.String()).Msg("not retrying: stopped by signal")
				return false, true
			}
		}
	}
}
