package inspect

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
)

// A job's states, as Judge decides them and every view shows them.
const (
	// StateHealthy: nothing to act on. A job with a schedule: its latest
	// due time ran and succeeded, is running, was skipped because the
	// run before it still held the lease, came due while an operator had
	// paused the job (now resumed), or came before the job's schedule was
	// set. A job without one: it is held (or a standby is taking it
	// over), or it last succeeded within the policy's age; and (by the
	// views' policy) its newest run that counts did not fail. A run
	// leasewrap was asked to stop counts neither way.
	StateHealthy = "healthy"
	// StateFailing: the run judged (of the latest due time, or the newest
	// run that counts) did not succeed.
	StateFailing = "failing"
	// StateStale: a job without a schedule, not held, has no success
	// recent enough.
	StateStale = "stale"
	// StateMissed: the latest due time was recorded missed: no instance
	// could run it in time.
	StateMissed = "missed"
	// StateOverdue: the latest due time was neither run nor recorded
	// missed by any instance: its schedulers are all down (or cannot reach
	// the database).
	StateOverdue = "overdue"
	// StateAbsent: no lease row and no run of the job.
	StateAbsent = "absent"
	// StateUnknown: the facts could not be read (no claims table, a
	// schedule this version cannot read).
	StateUnknown = "unknown"
	// StatePaused: an operator paused the job (leasewrap pause): nothing
	// runs it until it is resumed, on purpose.
	StatePaused = string(lease.StatePaused)
)

// States lists every state, healthy first, for a view that shows one
// series or class per state.
var States = []string{StateHealthy, StatePaused, StateFailing, StateStale, StateMissed, StateOverdue, StateAbsent, StateUnknown}

// Verdict is a job's state and why, decided once by Judge for every view.
type Verdict struct {
	Job    string
	State  string
	Reason string
	// Due is the scheduled time judged, for a job with a schedule (nil
	// before its first due time).
	Due *time.Time
	// Next is the job's next scheduled time after Now, by the database
	// clock (nil without a schedule).
	Next *time.Time
	// Now is the database clock the verdict was decided at.
	Now time.Time
}

// Healthy reports whether the verdict asks nothing of an operator.
func (v Verdict) Healthy() bool { return v.State == StateHealthy }

// Facts are what Judge decides from, all read in one snapshot with the
// database clock as Now.
type Facts struct {
	Job string
	Now time.Time
	// Known is false when the job has neither a lease row nor a run.
	Known bool
	// Held: a slot of the job is live now; Holders the holders of its live
	// slots, sorted.
	Held    bool
	Holders []string
	// Standby is the first live standby in the job's queue while no slot
	// is held and it is taking the lease over (TakingOver), "" otherwise.
	Standby string
	// Schedule is the job's schedule in its canonical form ("": none).
	Schedule string
	// Paused is the job's pause in force (nil: none).
	Paused *lease.Pause
	// LastRun is the newest finished run; LastCounted the newest that
	// counts (Run.Counts: not one leasewrap was asked to stop);
	// LastSuccess when the newest run that exited 0 finished, and
	// LastSuccessBy its holder.
	LastRun       *Run
	LastCounted   *Run
	LastSuccess   *time.Time
	LastSuccessBy string
	// Due is how the latest due time (DueTime) is accounted for, for a
	// job with a schedule; nil before its first due time, or when it could
	// not be read (DueErr says why).
	Due    *Account
	DueErr error
	// FirstClaim is the job's earliest scheduled time its claims keep
	// (nil: none). A due time before it came before the job was
	// scheduled (or before what the claims keep): it is not judged.
	FirstClaim *time.Time
	// ScheduledSince is when the job's schedule was recorded: by its
	// first scheduler, or by leasewrap reschedule (nil: not recorded). A
	// due time before it that nobody accounted for was owed by nobody:
	// it is not judged.
	ScheduledSince *time.Time
}

// Policy is how strictly Judge reads the facts of a job without a
// schedule: how old its last success may be (for a job not held), and
// whether a failed newest run that counts counts against it when a
// success is recent enough. ViewPolicy is
// the one status, history, the exporter and the web page use; check takes
// its --max-age and --fail-on-last-failure.
type Policy struct {
	MaxAge            time.Duration
	FailOnLastFailure bool
}

// ViewPolicy is the policy of the views: a success within a day, and a
// newest run that did not fail.
var ViewPolicy = Policy{MaxAge: 24 * time.Hour, FailOnLastFailure: true}

// Judge decides a job's state. A job with a schedule is judged by its
// latest due time alone, whatever the policy; one without, by its newest
// run that counts, whether it is held, and the age of its last success,
// as the policy says (judgeUnscheduled).
func Judge(f Facts, p Policy) Verdict {
	v := Verdict{Job: f.Job, Now: f.Now, State: StateHealthy}
	job := escape.Printable(f.Job)
	if f.Schedule != "" {
		if next, ok := schedule.NextOf(f.Schedule, f.Now); ok {
			v.Next = &next
		}
	}
	if p := f.Paused; p != nil {
		// On purpose: whatever else is true of the job, this is what to know.
		v.State, v.Reason = StatePaused, PauseReason(job, p)
		return v
	}
	if f.Schedule != "" {
		judgeScheduled(&v, f, job)
		return v
	}
	judgeUnscheduled(&v, f, p, job)
	return v
}

// judgeUnscheduled decides for a job without a schedule. A run leasewrap
// was asked to stop (a signal to it, a release, a handover) is neither a
// success nor a failure: the judgement looks past it to the newest run
// that counts. A job that is held, or that a live standby is taking over,
// runs: it is healthy unless that run failed, whatever the age of its last
// success (a service runs for weeks). One that is not is judged by the age
// of its last success, and, by the policy, its newest run that counts.
func judgeUnscheduled(v *Verdict, f Facts, p Policy, job string) {
	counted := f.LastCounted
	failed := counted != nil && !counted.Succeeded()
	running := f.Held || f.Standby != ""
	var age time.Duration
	if f.LastSuccess != nil {
		age = f.Now.Sub(*f.LastSuccess)
	}
	// A job that runs again after a failure is failing while that failure
	// is recent: a service whose command was killed (by the OOM killer,
	// say) and taken over is an alarm, not one that lasts as long as the
	// new run does.
	recent := failed && f.Now.Sub(counted.FinishedAt) <= p.MaxAge
	switch {
	case !f.Known:
		v.State, v.Reason = StateAbsent, fmt.Sprintf("no such job %s: no lease and no run in the history", job)
		return
	case running && recent && (p.FailOnLastFailure || f.LastSuccess == nil || age > p.MaxAge):
		v.State, v.Reason = StateFailing, lastFailed(f, job)
	case running:
		v.Reason = runningReason(f, job)
	case failed && f.LastSuccess == nil:
		v.State, v.Reason = StateFailing, fmt.Sprintf("%s has no successful run in the history", job)
	case f.LastSuccess == nil:
		v.State, v.Reason = StateStale, fmt.Sprintf("%s has no successful run in the history", job)
	case age > p.MaxAge:
		v.State, v.Reason = StateStale, fmt.Sprintf("%s last succeeded %s ago, longer than %s", job, RoundAge(age), p.MaxAge)
	case failed && p.FailOnLastFailure:
		v.State, v.Reason = StateFailing, lastFailed(f, job)
	default:
		v.Reason = fmt.Sprintf("%s last succeeded %s ago on %s", job, RoundAge(age), escape.Printable(f.LastSuccessBy))
		if failed {
			v.Reason += "; its newest run failed"
		}
	}
	if failed {
		v.Reason += fmt.Sprintf(" (%s%s on %s)", counted.Outcome, exitSuffix(counted.ExitCode), escape.Printable(counted.Holder))
	}
	if running && v.State != StateHealthy {
		v.Reason += "; " + where(f, job)
	}
	if last := f.LastRun; last != nil && !last.Counts() && v.State != StateHealthy {
		v.Reason += fmt.Sprintf("; its newest run on %s was %s%s", escape.Printable(last.Holder), last.Outcome, last.Stop())
	}
}

// lastFailed says when the newest run that counts failed.
func lastFailed(f Facts, job string) string {
	return fmt.Sprintf("%s last run failed, %s ago", job, RoundAge(f.Now.Sub(f.LastCounted.FinishedAt)))
}

// runningReason says where a held job (or one a standby is taking over)
// runs, and how its last run ended: stopped, and by whom; failed (with a
// success recent enough, or longer ago than the policy's age); or
// succeeded.
func runningReason(f Facts, job string) string {
	s := where(f, job)
	last := f.LastRun
	switch {
	case last == nil:
		return s + "; no run of it has finished yet"
	case !last.Counts():
		return s + fmt.Sprintf("; its last run on %s was %s%s", escape.Printable(last.Holder), last.Outcome, last.Stop())
	case last.Succeeded():
		return s + fmt.Sprintf("; its last run succeeded on %s, %s ago", escape.Printable(last.Holder), RoundAge(f.Now.Sub(last.FinishedAt)))
	}
	return s + fmt.Sprintf("; its newest run failed, %s ago", RoundAge(f.Now.Sub(last.FinishedAt)))
}

// where says who runs a held job, or which standby is taking it over.
func where(f Facts, job string) string {
	switch {
	case f.Held && len(f.Holders) > 0:
		return fmt.Sprintf("%s is running on %s", job, escape.Printable(strings.Join(f.Holders, ", ")))
	case f.Held:
		return fmt.Sprintf("%s is running", job)
	}
	return fmt.Sprintf("%s has no holder this moment; standby %s is taking it over", job, escape.Printable(f.Standby))
}

// TakeoverBound is how long after a job's lease came free (released or
// expired) a live standby in its queue counts as taking it over: a
// standby hears a release at once and looks every retry interval (a few
// seconds), and one handed the lease has one to adopt it. A job free for
// longer, with standbys that do not take it, is judged as not held.
const TakeoverBound = time.Minute

// TakingOver is the standby taking over a job no slot of which is held,
// its lease free for freedAgo, with queue its live standbys in order: the
// first, while freedAgo is within TakeoverBound; "" otherwise.
func TakingOver(queue []lease.Standby, freedAgo time.Duration) string {
	if len(queue) == 0 || freedAgo > TakeoverBound {
		return ""
	}
	return queue[0].Holder
}

// judgeScheduled decides from how the latest due time is accounted for.
// A time nobody ran is judged by why: missed is an alarm, skipped (the
// run before it went on) and paused (an operator's act, over once
// resumed) are not; nor is a run leasewrap was asked to stop.
func judgeScheduled(v *Verdict, f Facts, job string) {
	if f.DueErr != nil {
		v.State, v.Reason = StateUnknown, fmt.Sprintf("%s: cannot tell how its latest due time is accounted for: %v", job, f.DueErr)
		return
	}
	acc := f.Due
	if acc == nil {
		v.Reason = fmt.Sprintf("%s has no scheduled time due yet", job)
		return
	}
	unaccounted := acc.Claim == "" && acc.Run == nil
	if unaccounted && f.ScheduledSince != nil && acc.At.Before(*f.ScheduledSince) {
		v.Reason = fmt.Sprintf("%s has no scheduled time due since it was scheduled at %s", job, timefmt.Stamp(*f.ScheduledSince))
		return
	}
	if unaccounted && f.FirstClaim != nil && acc.At.Before(*f.FirstClaim) {
		v.Reason = fmt.Sprintf("%s has no scheduled time due since its first", job)
		return
	}
	at := acc.At.UTC()
	v.Due = &at
	when := timefmt.Stamp(at)
	outcome, by := acc.Claim, acc.By
	if run := acc.Run; run != nil && lease.NotRun(run.Outcome) {
		// The time's history row says the same as its claim, which may be
		// gone (pruned, or emptied by an operator).
		outcome = cmp.Or(outcome, run.Outcome)
		by = cmp.Or(by, run.By)
	}
	switch {
	case outcome == "" && acc.Run == nil:
		v.State, v.Reason = StateOverdue, fmt.Sprintf("%s: the time due at %s was not run, and no instance recorded it missed (are its schedulers running?)", job, when)
	case outcome == lease.OutcomeMissed:
		v.State, v.Reason = StateMissed, fmt.Sprintf("%s: the time due at %s was missed", job, when)
	case outcome == lease.OutcomeSkipped:
		v.Reason = fmt.Sprintf("%s: the time due at %s was skipped: the run before it still held the lease", job, when)
	case outcome == lease.OutcomePaused:
		v.Reason = fmt.Sprintf("%s: the time due at %s was paused by %s; nothing was owed", job, when, escape.Printable(byOrUnknown(by)))
	case acc.Run == nil:
		v.Reason = fmt.Sprintf("%s: the time due at %s is running", job, when)
	case acc.Run.Outcome == lease.OutcomeStopped:
		// As for a job without a schedule: leasewrap was asked to stop it
		// (a rolling restart of its schedulers, a release), which is no
		// failure of the command; the history says who asked.
		v.Reason = fmt.Sprintf("%s: the run of the time due at %s was stopped on %s%s: leasewrap was asked to stop it", job, when,
			escape.Printable(acc.Run.Holder), acc.Run.Stop())
	case !acc.Run.Succeeded():
		v.State, v.Reason = StateFailing, fmt.Sprintf("%s: the run of the time due at %s failed (%s%s on %s)", job, when,
			acc.Run.Outcome, exitSuffix(acc.Run.ExitCode), escape.Printable(acc.Run.Holder))
	default:
		v.Reason = fmt.Sprintf("%s: the time due at %s ran and succeeded on %s", job, when, escape.Printable(acc.Run.Holder))
	}
}

// byOrUnknown is who accounted for a time, or "an unknown operator" when
// that was not recorded.
func byOrUnknown(by string) string {
	if by == "" {
		return "an unknown operator"
	}
	return by
}

// PauseReason says who paused the job, since when, until when and why.
func PauseReason(job string, p *lease.Pause) string {
	s := fmt.Sprintf("%s is paused by %s since %s", job, escape.Printable(p.By), timefmt.Stamp(p.Since))
	if p.Until.IsZero() {
		s += ", until resumed"
	} else {
		s += ", until " + timefmt.Stamp(p.Until)
	}
	if p.Reason != "" {
		s += ": " + escape.Printable(p.Reason)
	}
	return s
}

func exitSuffix(code *int) string {
	if code == nil {
		return ""
	}
	return fmt.Sprintf(" %d", *code)
}

// RoundAge rounds an age for a sentence: to the millisecond under a
// second, the second under a minute, the minute above.
func RoundAge(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

// DueTime is the scheduled time of spec that decides a job's state at now
// (the database clock): the latest at or before now that is past its
// grace (a minute, at most half the period, as the schedulers give a time
// to start), or the zero time if none is within a year or spec cannot be
// read. Until a time's grace has passed, the one before it decides.
func DueTime(spec string, now time.Time) (time.Time, error) {
	s, err := schedule.Parse(spec, "")
	if err != nil {
		return time.Time{}, err
	}
	t := latestDue(s, now)
	if t.IsZero() {
		return t, nil
	}
	if now.Sub(t) < grace(s, t) {
		return latestDue(s, t.Add(-time.Nanosecond)), nil
	}
	return t, nil
}

// grace is how late scheduled time t may start and still be on time: the
// schedulers' default, capped at half the gap to the time after it.
func grace(s *schedule.Schedule, t time.Time) time.Duration {
	g := schedule.DefaultGrace
	if gap := s.Next(t).Sub(t) / 2; gap > 0 && gap < g {
		g = gap
	}
	return g
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
