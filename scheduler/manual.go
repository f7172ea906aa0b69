package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
)

// The scheduler's side of `leasewrap trigger`: a request to run the job now
// is a row of the claims table (see lease.RequestRun). A scheduler looks
// for one when it starts, when one is announced while it listens (or the
// lease is released while one waits), and at every step while it cannot
// listen, waking every retry interval for that; a listening scheduler
// sends nothing while it waits.

// manual runs the oldest requested run of the job, if there is one to
// look for and the lease is free, and returns how long to wait before the
// next step (wait, the step's own, or less when a request waits).
func (sc *scheduler) manual(ctx context.Context, wait time.Duration) (time.Duration, error) {
	cfg := sc.cfg
	retry := cfg.Timings.RetryInterval
	if !sc.requests.Listening() {
		// Polling: the next look comes within the retry interval.
		wait = min(wait, retry)
	}
	if !sc.requests.Look() {
		return wait, nil
	}
	var r lease.Requested
	sig, err := cfg.Host.WatchSignals(ctx, func(ctx context.Context) error {
		var err error
		r, err = cfg.Store.TakeRequested(ctx, cfg.Job, cfg.Schedule.Spec())
		return err
	})
	if sig != nil {
		if r.Lease != nil {
			cfg.Host.Abandon(r.Lease, sig, sc.log)
		}
		return 0, &stopSignal{sig}
	}
	if err != nil {
		sc.requests.Again()
		d, err := sc.failed(err)
		return min(wait, d), err
	}
	sc.recovered()
	sc.clock.set(r.Now)
	switch {
	case r.Lease != nil:
		return 0, sc.runRequested(r)
	case r.At.IsZero():
		return wait, nil
	case r.Held != nil:
		// The previous run still holds the lease: the request waits for
		// its release (announced) or its expiry.
		sc.log.Debug().Time("requested_at", r.At).Str("current_holder", r.Held.Holder).Msg("a requested run waits: the lease is held")
		sc.requests.Again()
		return min(wait, max(r.Held.ExpiresIn, retry)), nil //nolint:nilerr // a held lease is no failure: the request waits
	}
	// Taken elsewhere meanwhile: look again.
	sc.requests.Again()
	return min(wait, retry), nil
}

// runRequested runs the command under the lease r took for a requested
// run, then records the scheduled times that came due meanwhile as
// skipped, as after a scheduled run: runs of one job never overlap.
func (sc *scheduler) runRequested(r lease.Requested) error {
	log := sc.log.With().Time("requested_at", r.At).Logger()
	log.Info().Msg("running the job now, as requested (manual run)")
	sc.cfg.Monitor.Leading(r.Lease)
	ended, err := sc.cfg.Host.RunLease(r.Lease)
	sc.cfg.Monitor.NotLeading()
	sc.runs++
	sc.ran, sc.ended = err, ended
	// Another request may wait behind this one.
	sc.requests.Again()
	if sc.ended != nil {
		if err == nil {
			err = &stopSignal{sc.ended}
		}
		return err
	}
	if err != nil {
		log.Warn().Err(err).Msg("the requested run failed")
	}
	var during []lease.Missed
	for _, t := range sc.cfg.Schedule.Between(timefmt.Later(sc.last, r.Now), sc.clock.now(), schedule.DefaultMaxRuns) {
		during = append(during, lease.Missed{At: t})
	}
	if len(during) > 0 {
		if err := sc.record(context.Background(), lease.OutcomeSkipped, during, int64(len(during))); err != nil && errors.As(err, new(*stopSignal)) {
			return err
		}
	}
	return nil
}
