package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
	"github.com/redbite/leasewrap/schedule"
)

// checkScheduled is check without --max-age, for a job with a schedule:
// its latest due time decides. It is CRITICAL when that time was missed,
// its run failed, or no instance accounted for it (all schedulers down).
// A time just due is given until its grace has passed (a minute, at most
// half the period) before it counts: until then the one before decides.
func checkScheduled(c *cli.Context, job string) error {
	a, err := openAdmin(c)
	if err != nil {
		return unknown(c, job, err)
	}
	defer a.db.close()
	jobs, err := a.read.Status(c.Context, job)
	if errors.Is(err, lease.ErrNoJob) || err == nil && jobs[0].Schedule == nil {
		return unknown(c, job, fmt.Errorf("missing --max-age: how old the last success may be, as in --max-age 26h "+
			"(without it, check judges the latest due time of a job run with --schedule, and %s has none)", printable(job)))
	}
	if err != nil {
		return unknown(c, job, a.db.redact.wrap(err))
	}
	s, err := schedule.Parse(*jobs[0].Schedule, "")
	if err != nil {
		return unknown(c, job, fmt.Errorf("cannot read the schedule recorded for %s: %w", printable(job), err))
	}
	// The database's clock: the one the schedulers plan on.
	f, err := a.read.Freshness(c.Context, job)
	if err != nil {
		return unknown(c, job, a.db.redact.wrap(err))
	}
	due := dueTime(s, f.Now)
	if due.IsZero() {
		r := checkResult{Job: job, Status: "ok", Message: fmt.Sprintf("%s has no scheduled time due yet", printable(job))}
		return r.print(c.App.Writer, c.Bool("json"))
	}
	acc, err := a.read.Scheduled(c.Context, job, due)
	if err != nil {
		return unknown(c, job, a.db.redact.wrap(err))
	}
	return judgeScheduled(acc, job).print(c.App.Writer, c.Bool("json"))
}

// dueTime is the latest scheduled time at or before now that is past its
// grace, or the zero time if none is within a year.
func dueTime(s *schedule.Schedule, now time.Time) time.Time {
	t := latestDue(s, now)
	if t.IsZero() {
		return t
	}
	grace := min(schedule.DefaultGrace, s.Next(t).Sub(t)/2)
	if now.Sub(t) < grace {
		return latestDue(s, t.Add(-time.Nanosecond))
	}
	return t
}

// latestDue is the latest scheduled time at or before now, looking back
// at most a year. The look-back doubles from a minute, so that it walks
// few times whatever the period.
func latestDue(s *schedule.Schedule, now time.Time) time.Time {
	for back := time.Minute; back <= 2*366*24*time.Hour; back *= 2 {
		t := s.Next(now.Add(-back))
		if t.IsZero() || t.After(now) {
			continue
		}
		for next := s.Next(t); !next.IsZero() && !next.After(now); next = s.Next(t) {
			t = next
		}
		return t
	}
	return time.Time{}
}

// judgeScheduled decides the check from how the due time is accounted for.
func judgeScheduled(acc inspect.Account, job string) checkResult {
	r := checkResult{Job: job, Status: "ok", code: checkOK, ScheduledAt: utc(&acc.At)}
	at := stamp(acc.At)
	if run := acc.Run; run != nil {
		r.LastRunAt, r.LastRunOutcome, r.LastExitCode = utc(&run.FinishedAt), &run.Outcome, run.ExitCode
	}
	switch {
	case acc.Claim == "" && acc.Run == nil:
		r.code, r.Message = checkCritical, fmt.Sprintf("%s: the time due at %s was not run, and no instance recorded it missed (are its schedulers running?)", printable(job), at)
	case acc.Claim == lease.OutcomeMissed:
		r.code, r.Message = checkCritical, fmt.Sprintf("%s: the time due at %s was missed", printable(job), at)
	case acc.Claim == lease.OutcomeSkipped:
		r.Message = fmt.Sprintf("%s: the time due at %s was skipped: the run before it still held the lease", printable(job), at)
	case acc.Run == nil:
		r.Message = fmt.Sprintf("%s: the time due at %s is running", printable(job), at)
	case !acc.Run.Succeeded():
		r.code, r.Message = checkCritical, fmt.Sprintf("%s: the run of the time due at %s failed (%s%s on %s)", printable(job), at,
			acc.Run.Outcome, exitSuffix(acc.Run.ExitCode), printable(acc.Run.Holder))
	default:
		r.Message = fmt.Sprintf("%s: the time due at %s ran and succeeded on %s", printable(job), at, printable(acc.Run.Holder))
	}
	if r.code == checkCritical {
		r.Status = "critical"
	}
	return r
}
