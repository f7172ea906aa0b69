package lease_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/lease"
)

// New fills in the timings not set from the TTL, as --ttl does: a TTL
// shorter than the default renew interval plus grace is not refused.
func TestNewDerivesTimingsFromTheTTL(t *testing.T) {
	for _, ttl := range []time.Duration{20 * time.Second, time.Second, 10 * time.Minute} {
		s, err := lease.New(nil, lease.WithTTL(ttl))
		if err != nil {
			t.Errorf("New(WithTTL(%s)): %v", ttl, err)
			continue
		}
		if s.TTL() != ttl {
			t.Errorf("New(WithTTL(%s)).TTL() = %s", ttl, s.TTL())
		}
	}
	// A timing set by its own option stays as set, whatever the TTL.
	if _, err := lease.New(nil, lease.WithTTL(20*time.Second), lease.WithGrace(15*time.Second)); err == nil {
		t.Error("New accepted a grace set beyond what a 20s TTL allows")
	}
	want := lease.Timings{TTL: 20 * time.Second, RenewInterval: 5 * time.Second, RetryInterval: 889 * time.Millisecond,
		Grace: 4444 * time.Millisecond}
	if got := lease.TimingsFor(20*time.Second, map[lease.Setting]time.Duration{lease.SettingRenewInterval: 5 * time.Second}); got != want {
		t.Errorf("TimingsFor(20s, renew 5s) = %+v, want %+v", got, want)
	}
}

// A refusal names the settings at fault as an operator sets them.
func TestTimingErrorNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		opts []lease.Option
		want []lease.Setting
	}{
		{[]lease.Option{lease.WithGrace(0)}, []lease.Setting{lease.SettingGrace}},
		{[]lease.Option{lease.WithRenewInterval(time.Millisecond)}, []lease.Setting{lease.SettingRenewInterval}},
		{[]lease.Option{lease.WithTTL(20 * time.Second), lease.WithRenewInterval(19 * time.Second)},
			[]lease.Setting{lease.SettingTTL, lease.SettingRenewInterval, lease.SettingGrace, lease.SettingRetryInterval}},
	} {
		_, err := lease.New(nil, tc.opts...)
		var te *lease.TimingError
		if !errors.As(err, &te) || !slices.Equal(te.Settings, tc.want) {
			t.Errorf("New: %v, want a *TimingError naming %v", err, tc.want)
			continue
		}
		// In words, not in a flag's name: the command line names its own.
		names := make([]string, len(tc.want))
		for i, s := range tc.want {
			names[i] = string(s)
		}
		if want := "invalid " + strings.Join(names, ", ") + ": "; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "-interval") {
			t.Errorf("New: %v, want it to begin %q", err, want)
		}
	}
}

// A standby handed the lease has one retry interval to adopt it, at least
// a second: a frozen head of the queue holds a handoff up that long, one
// retry interval (2 s) at the default timings.
func TestFirstExpiryIsOneRetryInterval(t *testing.T) {
	for _, c := range []struct {
		ttl, want time.Duration
	}{
		{45 * time.Second, 2 * time.Second},
		{90 * time.Second, 4 * time.Second},
		{10 * time.Second, time.Second},
	} {
		if got := lease.FirstExpiry(lease.DeriveTimings(c.ttl)); got != c.want {
			t.Errorf("FirstExpiry with a TTL of %s = %s, want %s", c.ttl, got, c.want)
		}
	}
}
