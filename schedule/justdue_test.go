package schedule

import (
	"testing"
	"time"
)

// A crontab line (--once) is for the time just due: the latest when it is
// less than the grace late (capped at half the period), else the next
// when it comes due within the early tolerance (capped likewise), else
// none, however recent the latest time is in a catch-up window.
func TestJustDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		spec, zone, now string
		want            string // "" for none
	}{
		{"0 2 * * *", "", "2026-03-10T02:00:00Z", "2026-03-10T02:00:00Z"},
		{"0 2 * * *", "", "2026-03-10T02:00:59Z", "2026-03-10T02:00:00Z"},              // within the minute's grace
		{"0 2 * * *", "", "2026-03-10T02:01:00Z", ""},                                  // a minute late: past the grace
		{"0 2 * * *", "", "2026-03-10T15:46:00Z", ""},                                  // 13 h late
		{"0 2 * * *", "", "2026-03-10T01:59:55Z", "2026-03-10T02:00:00Z"},              // 5 s early
		{"0 2 * * *", "", "2026-03-10T01:59:54.9Z", ""},                                // more than 5 s early
		{"0 2 * * *", "Europe/Berlin", "2026-03-10T01:00:10Z", "2026-03-10T01:00:00Z"}, // 02:00 Berlin
		{"0 2 * * *", "Europe/Berlin", "2026-03-10T02:00:00Z", ""},
		{"@every 10s", "", "2026-03-10T00:00:09Z", "2026-03-10T00:00:10Z"}, // 1 s early
		{"@every 10s", "", "2026-03-10T00:00:04.9Z", "2026-03-10T00:00:00Z"},
		{"@every 10s", "", "2026-03-10T00:00:05Z", "2026-03-10T00:00:10Z"}, // half the period either way
		{"@every 2s", "", "2026-03-10T00:00:00.9Z", "2026-03-10T00:00:00Z"},
		{"@every 2s", "", "2026-03-10T00:00:01Z", "2026-03-10T00:00:02Z"},
		{"@every 1h", "", "2026-03-10T00:00:30Z", "2026-03-10T00:00:00Z"},
		{"@every 1h", "", "2026-03-10T00:01:00Z", ""},
		{"@every 1h", "", "2026-03-10T00:59:54Z", ""},
	} {
		s := mustParse(t, tc.spec, tc.zone)
		got, ok := s.JustDue(at(tc.now), 0, 0)
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s %s at %s: just due %s, want none", tc.spec, tc.zone, tc.now, got.UTC().Format(time.RFC3339))
		case tc.want != "" && (!ok || !got.Equal(at(tc.want))):
			t.Errorf("%s %s at %s: just due %s (%v), want %s", tc.spec, tc.zone, tc.now, got.UTC().Format(time.RFC3339), ok, tc.want)
		}
	}
}

func TestBoundIsHalfTheGapAtMost(t *testing.T) {
	t0 := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		d    time.Duration
		want time.Duration
	}{
		{"@every 2s", DefaultGrace, time.Second},
		{"@every 10s", DefaultEarly, 5 * time.Second},
		{"@every 6s", DefaultEarly, 3 * time.Second},
		{"* * * * *", DefaultGrace, 30 * time.Second},
		{"0 * * * *", DefaultGrace, time.Minute},
	} {
		if got := mustParse(t, tc.spec, "").Bound(t0, tc.d); got != tc.want {
			t.Errorf("%s: Bound(%s) = %s, want %s", tc.spec, tc.d, got, tc.want)
		}
	}
}

func TestZoneNamed(t *testing.T) {
	for _, tc := range []struct {
		spec, zone string
		want       bool
	}{
		{"0 2 * * *", "", false},
		{"0 2 * * *", "UTC", true},
		{"0 2 * * *", "Europe/Berlin", true},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "", true},
		{"TZ=UTC 0 2 * * *", "", true},
		{"@daily", "", false},
	} {
		if got := mustParse(t, tc.spec, tc.zone).ZoneNamed(); got != tc.want {
			t.Errorf("Parse(%q, %q).ZoneNamed() = %v, want %v", tc.spec, tc.zone, got, tc.want)
		}
	}
}

// The host's zone is CRON_TZ (cron passes it to the line), else TZ, else
// the system's; it reads crontab lines as UTC does only when it is UTC
// now and has no transition ahead (London in winter does not).
func TestHostZone(t *testing.T) {
	winter := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		env      map[string]string
		wantName string
		wantUTC  bool
	}{
		{map[string]string{"TZ": "Europe/Berlin"}, "Europe/Berlin", false},
		{map[string]string{"TZ": ":Europe/Berlin"}, "Europe/Berlin", false},
		{map[string]string{"TZ": "Europe/London"}, "Europe/London", false},
		{map[string]string{"TZ": "Etc/UTC"}, "Etc/UTC", true},
		{map[string]string{"TZ": "Europe/Berlin", "CRON_TZ": "UTC"}, "UTC", true},
		{map[string]string{"TZ": "UTC", "CRON_TZ": "America/New_York"}, "America/New_York", false},
	} {
		name, utc := HostZone(func(k string) string { return tc.env[k] }, winter)
		if name != tc.wantName || utc != tc.wantUTC {
			t.Errorf("%v: HostZone = %q, %v; want %q, %v", tc.env, name, utc, tc.wantName, tc.wantUTC)
		}
	}
}
