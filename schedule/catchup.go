package schedule

import (
	"math"
	"time"
)

// Policy says what to do with due times that nobody ran on time.
type Policy string

// The catch-up policies.
const (
	// CatchUpNone runs no late time; every late time is missed.
	CatchUpNone Policy = "none"
	// CatchUpLatest runs the most recent late time once, if it is within
	// the window; the others are missed. The default.
	CatchUpLatest Policy = "latest"
	// CatchUpAll runs every late time within the window, oldest first;
	// older ones are missed.
	CatchUpAll Policy = "all"
)

// Defaults for CatchUp's fields.
const (
	DefaultPolicy = CatchUpLatest
	// DefaultWindow is how far back a late time may still be run.
	DefaultWindow = 24 * time.Hour
	// DefaultGrace is how late a due time may start and still count as on
	// time (it then runs under every policy). It is capped at half the gap to
	// the time after it, so that "@every 2s" tolerates one second.
	DefaultGrace = time.Minute
	// DefaultEarly is how long before a due time a run for one time only
	// (a crontab line, --once) may start and still be for that time: it
	// waits for it. Capped like DefaultGrace.
	DefaultEarly = 5 * time.Second
	// DefaultMaxRuns bounds the runs one plan returns; the caller plans again
	// after running them.
	DefaultMaxRuns = 100
	// DefaultMaxMissed bounds the missed times a plan lists one by one; older
	// ones are summarised in Plan.Collapsed.
	DefaultMaxMissed = 100
)

// maxCount bounds the walk that counts missed cron times (about two years of
// a schedule due every minute); past it Span.AtLeast is set.
const maxCount = 1 << 20

// ParsePolicy reads a --catch-up value; the empty string gives DefaultPolicy.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return DefaultPolicy, nil
	case CatchUpNone, CatchUpLatest, CatchUpAll:
		return p, nil
	}
	return "", invalid("catch-up policy %q is not one of none, latest or all", s)
}

// CatchUp configures Plan. Zero fields take the Default values.
type CatchUp struct {
	Policy    Policy
	Window    time.Duration
	Grace     time.Duration
	MaxRuns   int
	MaxMissed int
}

func (c CatchUp) withDefaults() CatchUp {
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.MaxRuns <= 0 {
		c.MaxRuns = DefaultMaxRuns
	}
	if c.MaxMissed <= 0 {
		c.MaxMissed = DefaultMaxMissed
	}
	return c
}

// Span summarises missed times too many to list: Count of them, from First
// to Last. AtLeast says Count stopped at a bound and is a lower bound.
type Span struct {
	Count       int64
	First, Last time.Time
	AtLeast     bool
}

// Plan says how to account for the due times in (last, now]. Every such time
// up to Through is in exactly one of Collapsed, Missed and Run, and in that
// order of age: Collapsed oldest, Run newest. The latest due time, when it is
// on time (see DefaultGrace), is in Run under every policy.
type Plan struct {
	Collapsed Span        // oldest missed times, summarised
	Missed    []time.Time // missed times listed one by one, oldest first
	Run       []time.Time // times to run, oldest first
	// Through is the latest time this plan accounts for. It is before now
	// when the run list was cut at MaxRuns: plan again from Through after
	// running them.
	Through time.Time
}

// Plan decides, at now, what to do with the due times after last (the latest
// scheduled time already run, missed or skipped). A zero last means the job
// has no history: only the window before now is looked at.
func (s *Schedule) Plan(last, now time.Time, c CatchUp) Plan {
	c = c.withDefaults()
	windowStart := now.Add(-c.Window) // due times before it are outside the window
	if last.IsZero() {
		last = windowStart.Add(-time.Nanosecond)
	}
	latest := s.latest(last, now)
	if latest.IsZero() {
		return Plan{Through: last}
	}
	p := Plan{Through: latest}
	lateEnd := latest // the late times are those in (last, lateEnd]
	var onTime []time.Time
	if s.onTime(latest, now, c.Grace) {
		onTime = []time.Time{latest}
		lateEnd = latest.Add(-time.Nanosecond)
	}
	switch c.Policy {
	case CatchUpNone:
		p.Collapsed, p.Missed = s.missed(last, lateEnd, c.MaxMissed)
		p.Run = onTime
	case CatchUpLatest:
		if onTime == nil && !latest.Before(windowStart) {
			onTime = []time.Time{latest}
			lateEnd = latest.Add(-time.Nanosecond)
		}
		p.Collapsed, p.Missed = s.missed(last, lateEnd, c.MaxMissed)
		p.Run = onTime
	case CatchUpAll:
		outside := windowStart.Add(-time.Nanosecond)
		if outside.After(lateEnd) {
			outside = lateEnd
		}
		p.Collapsed, p.Missed = s.missed(last, outside, c.MaxMissed)
		if outside.Before(last) {
			outside = last
		}
		late := s.Between(outside, lateEnd, c.MaxRuns)
		if n := len(late); n == c.MaxRuns && (onTime != nil || !s.Next(late[n-1]).After(lateEnd)) {
			p.Run, p.Through = late, late[n-1]
		} else {
			p.Run = append(late, onTime...)
		}
	}
	return p
}

// onTime reports whether due time t, seen at now, is recent enough to count
// as on time: no later than grace, capped at half the gap to the next time.
func (s *Schedule) onTime(t, now time.Time, grace time.Duration) bool {
	return now.Sub(t) < s.Bound(t, grace)
}

// Bound returns d capped at half the gap between due time t and the time
// after it, so that a tolerance around one time never reaches the next:
// DefaultGrace and DefaultEarly are one minute and five seconds, but one
// second each around the times of "@every 2s".
func (s *Schedule) Bound(t time.Time, d time.Duration) time.Duration {
	if gap := s.Next(t).Sub(t) / 2; gap > 0 && gap < d {
		return gap
	}
	return d
}

// JustDue is the time a run for one time only (a crontab line, --once)
// started at now is for: the latest due time at or before now when it is
// less than grace late, else the next time when it comes due within early
// (each capped by Bound). A crontab line fires on the minute, on a host
// whose clock may run a little ahead of the schedule's or whose cron may
// be a little late; a time further off is not the one it was started
// for, and ok is false.
func (s *Schedule) JustDue(now time.Time, grace, early time.Duration) (at time.Time, ok bool) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	if early <= 0 {
		early = DefaultEarly
	}
	if prev := s.Prev(now, grace); !prev.IsZero() && s.onTime(prev, now, grace) {
		return prev, true
	}
	if next := s.Next(now); !next.IsZero() && next.Sub(now) <= s.Bound(next, early) {
		return next, true
	}
	return time.Time{}, false
}

// Prev returns the latest due time at or before now and no more than
// within before it, or the zero time.
func (s *Schedule) Prev(now time.Time, within time.Duration) time.Time {
	return s.latest(now.Add(-within-time.Nanosecond), now)
}

// latest returns the latest due time in (last, now], or the zero time.
func (s *Schedule) latest(last, now time.Time) time.Time {
	if s.every > 0 {
		t := s.nextEvery(now).Add(-s.every)
		if t.After(last) && !t.Before(epoch) {
			return t
		}
		return time.Time{}
	}
	list, _ := s.recent(last, now, 1)
	if len(list) == 0 {
		return time.Time{}
	}
	return list[len(list)-1]
}

// missed splits the due times in (from, to] into the latest keep of them,
// listed, and a summary of the others.
func (s *Schedule) missed(from, to time.Time, keep int) (Span, []time.Time) {
	if !to.After(from) {
		return Span{}, nil
	}
	if s.every > 0 {
		return s.missedEvery(from, to, keep)
	}
	list, lo := s.recent(from, to, keep)
	if len(list) <= keep {
		return Span{}, list
	}
	older := list[:len(list)-keep]
	span := Span{Count: int64(len(older)), First: older[0], Last: older[len(older)-1]}
	if lo.After(from) {
		if first, n, capped := s.count(from, lo); n > 0 {
			span.First, span.AtLeast = first, capped
			span.Count += n
		}
	}
	return span, list[len(list)-keep:]
}

func (s *Schedule) missedEvery(from, to time.Time, keep int) (Span, []time.Time) {
	first := s.nextEvery(from)
	if first.After(to) {
		return Span{}, nil
	}
	last := s.nextEvery(to).Add(-s.every)
	count := int64(last.Sub(first)/s.every) + 1
	n := min(int64(keep), count)
	list := make([]time.Time, 0, n)
	for i := n - 1; i >= 0; i-- {
		list = append(list, last.Add(-time.Duration(i)*s.every))
	}
	if count == n {
		return Span{}, list
	}
	return Span{Count: count - n, First: first, Last: list[0].Add(-s.every)}, list
}

// recent returns the due times in (lo, to], oldest first, for the latest lo
// after from that gives more than keep of them (or lo = from). Doubling the
// look-back keeps the walk close to keep times however long (from, to] is.
func (s *Schedule) recent(from, to time.Time, keep int) (list []time.Time, lo time.Time) {
	total := to.Sub(from)
	for d := time.Hour; ; {
		lo = from
		if d < total {
			lo = to.Add(-d)
		}
		list = s.Between(lo, to, math.MaxInt)
		if len(list) > keep || lo.Equal(from) {
			return list, lo
		}
		if d > total/2 {
			d = total
		} else {
			d *= 2
		}
	}
}

// Count is how many due times fall in (from, to], at most about two
// years of a schedule due every minute: what a summary of missed times
// recorded from its first to its last time stands for.
func (s *Schedule) Count(from, to time.Time) int64 {
	if !to.After(from) {
		return 0
	}
	if s.every > 0 {
		first := s.nextEvery(from)
		if first.After(to) {
			return 0
		}
		return int64(s.nextEvery(to).Add(-s.every).Sub(first)/s.every) + 1
	}
	_, n, _ := s.count(from, to)
	return n
}

// count walks the due times in (from, to], at most maxCount of them.
func (s *Schedule) count(from, to time.Time) (first time.Time, n int64, capped bool) {
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		if n == 0 {
			first = t
		}
		if n++; n >= maxCount {
			return first, n, true
		}
	}
	return first, n, false
}
