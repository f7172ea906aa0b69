package main

import "time"

// result is what the fleet reports. Times are in the unit their name says;
// rates are per second of the measurement.
type result struct {
	Listen       bool    `json:"listen"`
	Jobs         int     `json:"jobs"`
	Participants int     `json:"participants"`
	Seconds      float64 `json:"seconds"`
	TTLSeconds   float64 `json:"ttl_s"`
	RenewSeconds float64 `json:"renew_s"`
	RetrySeconds float64 `json:"retry_s"`

	// CPU seconds per second: the cluster's (-1 when not measured),
	// PgBouncer's (-1 likewise) and this process's.
	DBCPU      float64 `json:"db_cpu_per_s"`
	BouncerCPU float64 `json:"pgbouncer_cpu_per_s"`
	SimCPU     float64 `json:"sim_cpu_per_s"`
	Commits    float64 `json:"commits_per_s"`
	Xids       float64 `json:"xids_per_s"`
	// Statements is every statement the participants sent (each of a
	// pipeline's), leaders and standbys, listening connections included.
	Statements float64 `json:"statements_per_s"`
	connCounts
	// BackendMemMiB is the PSS of the cluster's processes at the end of
	// the measurement (-1 when not measured), over BackendProcs of them.
	BackendMemMiB float64 `json:"backend_mem_mib"`
	BackendProcs  int     `json:"backend_procs"`

	// HandoffMS runs from a leader calling Release to another holding the
	// lease; TakeoverS from a leader's crash to another holding it, and
	// AfterExpiryMS from the expiry the dead leader left to that take
	// (both on the database clock). Pending counts handoffs begun during
	// the measurement that no one had completed when the fleet stopped.
	HandoffMS     spread `json:"handoff_ms"`
	TakeoverS     spread `json:"takeover_s"`
	AfterExpiryMS spread `json:"after_expiry_ms"`
	Pending       int    `json:"pending_handoffs"`
	Skipped       int64  `json:"skipped_events"`

	// StandbyTakes and StandbyAdopts are the takes and the adopts of a
	// handed lease that participants sent while standing by during the
	// measurement, whether they took the lease or not; Completed, the
	// graceful handoffs and crash takeovers completed in it; and
	// WritesPerHandoff, the first two over the third (-1: none completed,
	// or fewer writes counted than handoffs, which cannot be).
	StandbyTakes     int64   `json:"standby_takes"`
	StandbyAdopts    int64   `json:"standby_adopts"`
	Completed        int     `json:"handoffs_completed"`
	WritesPerHandoff float64 `json:"writes_per_handoff"`

	// Violations: acquisitions while another participant held the job;
	// token regressions; overlapping runs of one job in the history.
	Violations       int64 `json:"violations"`
	TokenRegressions int64 `json:"token_regressions"`
	HistoryRuns      int64 `json:"history_runs"`
	HistoryOverlaps  int64 `json:"history_overlaps"`

	// Lost counts leases lost that the schedule did not end; Failures,
	// statements that failed during the measurement.
	Lost          int64   `json:"lost"`
	AcquireErrors int64   `json:"acquire_errors"`
	Failures      int64   `json:"failures"`
	Renewals      int     `json:"renewals"`
	RenewFailures int64   `json:"renew_failures"`
	RenewP99MS    float64 `json:"renew_p99_ms"`
}

// result puts the measurements together.
func (f *fleet) result(before, after snapshot, conns connCounts, runs, overlaps int64) *result {
	secs := after.at.Sub(before.at).Seconds()
	r := &result{
		Listen: f.cfg.listen, Jobs: f.cfg.jobs, Participants: f.cfg.jobs * f.cfg.perJob, Seconds: secs,
		TTLSeconds: f.timings.TTL.Seconds(), RenewSeconds: f.timings.RenewInterval.Seconds(),
		RetrySeconds: f.timings.RetryInterval.Seconds(),
		DBCPU:        -1, BouncerCPU: -1, BackendMemMiB: -1,
		SimCPU:       (after.self - before.self).Seconds() / secs,
		Commits:      float64(after.commits-before.commits) / secs,
		Xids:         float64(after.nextXid-before.nextXid) / secs,
		Statements:   float64(after.statements-before.statements) / secs,
		connCounts:   conns,
		StandbyTakes: after.takes - before.takes, StandbyAdopts: after.adopts - before.adopts,
		Skipped: f.skipped.Load(), Violations: f.violations.Load(), TokenRegressions: f.tokenRegressions.Load(),
		HistoryRuns: runs, HistoryOverlaps: overlaps, Lost: f.lost.Load(), AcquireErrors: f.acquireErrors.Load(),
		Failures: f.failures.Load(), RenewFailures: f.renewFailures.Load(),
	}
	if f.cfg.postmaster > 0 {
		r.DBCPU = float64(after.dbTicks-before.dbTicks) / userHZ / secs
		r.BackendMemMiB, r.BackendProcs = float64(after.memKiB)/1024, after.procs
	}
	if f.cfg.pgbouncer > 0 {
		r.BouncerCPU = float64(after.pgbTicks-before.pgbTicks) / userHZ / secs
	}
	f.handoffResults(r, after.at)
	r.WritesPerHandoff = -1
	switch writes := r.StandbyTakes + r.StandbyAdopts; {
	case writes < int64(r.Completed):
		// Every handoff or takeover is some standby's take or adopt:
		// fewer means the marks no longer match the lease package's
		// statements, and the figure would pass for a good one.
		logf("cannot count the standbys' writes: %d takes and adopts for %d handoffs and takeovers (do takeMark and adoptMark still match the lease package's statements?)",
			writes, r.Completed)
	case r.Completed > 0:
		r.WritesPerHandoff = float64(writes) / float64(r.Completed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Renewals = len(f.renewals)
	ms := make([]float64, 0, len(f.renewals))
	for _, d := range f.renewals {
		ms = append(ms, float64(d)/float64(time.Millisecond))
	}
	r.RenewP99MS = spreadOf(ms).P99
	return r
}

// handoffResults sums up the handoffs and takeovers, and counts those
// completed by end, the end of the measurement.
func (f *fleet) handoffResults(r *result, end time.Time) {
	var handoff, takeover, afterExpiry []float64
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.handoffs {
		if h.taken.IsZero() {
			r.Pending++
			continue
		}
		if !h.taken.After(end) {
			r.Completed++
		}
		if !h.crash {
			handoff = append(handoff, float64(h.taken.Sub(h.at))/float64(time.Millisecond))
			continue
		}
		takeover = append(takeover, h.taken.Sub(h.at).Seconds())
		if h.expiry > 0 {
			afterExpiry = append(afterExpiry, float64(h.newToken-h.expiry)/1e3)
		}
	}
	r.HandoffMS, r.TakeoverS, r.AfterExpiryMS = spreadOf(handoff), spreadOf(takeover), spreadOf(afterExpiry)
}
