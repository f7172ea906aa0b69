package lease

import (
	"fmt"
	"strings"
	"time"
)

// Default timings. The renewal interval, the grace work gets to stop, one
// retry of a failed renewal and the safety margin all fit inside the TTL.
const (
	// DefaultTTL is how long a lease lasts after each acquisition or renewal.
	DefaultTTL = 45 * time.Second
	// DefaultRetryInterval is how often a standby polls a held lease and a
	// holder retries a failed renewal: TTL * 2/45.
	DefaultRetryInterval = 2 * time.Second
)

// Floors below which a timing cannot work, even on a healthy loopback
// database: a renewal needs a round trip and a commit.
const (
	MinRenewInterval = 100 * time.Millisecond
	MinRetryInterval = 10 * time.Millisecond
)

// Timings are a lease's four durations.
type Timings struct {
	// TTL is the lease duration written to the database.
	TTL time.Duration
	// RenewInterval is how often the holder renews.
	RenewInterval time.Duration
	// RetryInterval is how often a standby polls and a holder retries a
	// failed renewal.
	RetryInterval time.Duration
	// Grace is how long work gets between being told to stop and being
	// killed.
	Grace time.Duration
}

// DeriveTimings returns the timings that go with ttl in the same proportions
// as the defaults (renew ttl/3, grace 2/9 of it, retry 2/45 of it), which
// satisfy Check for any ttl the floors allow.
func DeriveTimings(ttl time.Duration) Timings {
	return Timings{
		TTL:           ttl,
		RenewInterval: (ttl / 3).Round(time.Millisecond),
		RetryInterval: (ttl * 2 / 45).Round(time.Millisecond),
		Grace:         (ttl * 2 / 9).Round(time.Millisecond),
	}
}

// SafetyMargin is the part of the TTL kept back for the cost of stopping
// work and for the rate difference between the local and the database clock:
// work must be gone this long before the local deadline.
func SafetyMargin(ttl time.Duration) time.Duration { return ttl / 20 }

// StopBefore is how long before the local deadline work is told to stop:
// the grace plus the safety margin.
func (t Timings) StopBefore() time.Duration { return t.Grace + SafetyMargin(t.TTL) }

// Setting names one of the four timings, in words, so that an error about
// it can say which to change; a caller that reads them under names of its
// own (options, flags) says it in those.
type Setting string

// The four timings.
const (
	SettingTTL           Setting = "TTL"
	SettingRenewInterval Setting = "renew interval"
	SettingRetryInterval Setting = "retry interval"
	SettingGrace         Setting = "grace"
)

// Of returns the timing s names in t.
func (s Setting) Of(t Timings) time.Duration {
	return *s.in(&t)
}

func (s Setting) in(t *Timings) *time.Duration {
	switch s {
	case SettingRenewInterval:
		return &t.RenewInterval
	case SettingRetryInterval:
		return &t.RetryInterval
	case SettingGrace:
		return &t.Grace
	}
	return &t.TTL
}

// TimingsFor returns the timings of a lease with ttl: those in set as
// given, the others following the TTL (DeriveTimings). It is how both
// New and the command line fill in what was not set.
func TimingsFor(ttl time.Duration, set map[Setting]time.Duration) Timings {
	t := DeriveTimings(ttl)
	for s, d := range set {
		*s.in(&t) = d
	}
	return t
}

// TimingError reports timings that cannot keep a lease safe. Settings
// names every timing that needs to change; Fix holds values that satisfy
// the rule.
type TimingError struct {
	Settings []Setting
	Timings
	Msg string
	// Fix is a set of timings that would be accepted; zero when no change of
	// the named settings alone can help.
	Fix Timings
}

func (e *TimingError) Error() string {
	names := make([]string, len(e.Settings))
	for i, s := range e.Settings {
		names[i] = string(s)
	}
	return fmt.Sprintf("invalid %s: %s", strings.Join(names, ", "), e.Msg)
}

// Check reports whether the timings can be safe together: all positive and
// above the floors, the TTL a whole number of microseconds (that is how it
// is sent), and renew interval + grace + safety margin + one retry inside
// the TTL, so that a failed renewal is retried at least once before work has
// to stop.
func (t Timings) Check() error {
	for _, d := range []struct {
		setting    Setting
		value, min time.Duration
	}{{SettingTTL, t.TTL, time.Microsecond}, {SettingRenewInterval, t.RenewInterval, MinRenewInterval},
		{SettingRetryInterval, t.RetryInterval, MinRetryInterval}, {SettingGrace, t.Grace, time.Microsecond}} {
		if d.value <= 0 {
			return &TimingError{Settings: []Setting{d.setting}, Timings: t, Msg: "must be positive"}
		}
		if d.value < d.min {
			return &TimingError{Settings: []Setting{d.setting}, Timings: t, Msg: fmt.Sprintf("must be at least %s", d.min)}
		}
	}
	if t.TTL%time.Microsecond != 0 {
		return &TimingError{Settings: []Setting{SettingTTL}, Timings: t, Msg: "must be a whole number of microseconds"}
	}
	if t.RenewInterval+t.Grace+t.RetryInterval+SafetyMargin(t.TTL) < t.TTL {
		return nil
	}
	fix := DeriveTimings(t.TTL)
	return &TimingError{
		Settings: []Setting{SettingTTL, SettingRenewInterval, SettingGrace, SettingRetryInterval},
		Timings:  t,
		Msg: fmt.Sprintf("renew interval (%s) + grace (%s) + retry interval (%s) + 5%% of the TTL must stay under the TTL (%s)",
			t.RenewInterval, t.Grace, t.RetryInterval, t.TTL),
		Fix: fix,
	}
}

// MinTTL is the shortest TTL that the other three timings fit in.
func (t Timings) MinTTL() time.Duration {
	// renew + grace + retry + ttl/20 < ttl  <=>  ttl > (renew + grace + retry) * 20/19
	return ((t.RenewInterval+t.Grace+t.RetryInterval)*20/19 + time.Second).Truncate(time.Second)
}
