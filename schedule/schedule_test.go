package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

func mustParse(t testing.TB, spec, zone string) *Schedule {
	t.Helper()
	s, err := Parse(spec, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, zone, err)
	}
	return s
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ spec, zone, want string }{
		{"", "", "schedule is empty"},
		{"   ", "", "schedule is empty"},
		{"0 2 * *", "", "has 4 fields"},
		{"0 0 2 * * *", "", "has 6 fields"},
		{"61 2 * * *", "", "valid: five fields"},
		{"0 24 * * *", "", "valid: five fields"},
		{"0 0 0 * *", "", "valid: five fields"},
		{"0 0 * 13 *", "", "valid: five fields"},
		{"0 0 * * 8", "", "valid: five fields"},
		{"0 0 * * fri#3", "", "L, W and # (last day, nearest weekday, nth weekday) are not supported"},
		{"0 0 L * *", "", "L, W and # (last day, nearest weekday, nth weekday) are not supported"},
		{"0 0 15W * *", "", "are not supported"},
		{"0 0 * * 5L", "", "are not supported"},
		{"H 0 * * *", "", "valid: five fields"},
		{"0 0 30 2 *", "", "never occurs"},
		{"0 0 31 4,6 *", "", "never occurs"},
		{"@fortnightly", "", `unknown descriptor "@fortnightly"`},
		{"@every", "", "@every takes one duration"},
		{"@every 2s 3s", "", "@every takes one duration"},
		{"@every 500ms", "", "whole seconds, at least 1s"},
		{"@every 1.5s", "", "whole seconds, at least 1s"},
		{"@every -2s", "", "whole seconds, at least 1s"},
		{"@every soon", "", "whole seconds, at least 1s"},
		{"CRON_TZ=Europe/Berlin", "", "no schedule after it"},
		{"TZ=Mars/Olympus 0 2 * * *", "", `unknown time zone "Mars/Olympus"`},
		{"0 2 * * *", "Europe/Berln", `unknown time zone "Europe/Berln"`},
		{"0 2 * * *", "Local", `time zone "Local" differs from host to host`},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "America/New_York",
			`says time zone "Europe/Berlin" but the time zone given is "America/New_York"`},
	} {
		_, err := Parse(tc.spec, tc.zone)
		if err == nil {
			t.Errorf("Parse(%q, %q) = nil error, want %q", tc.spec, tc.zone, tc.want)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("Parse(%q, %q) = %q, want one line wrapping ErrInvalid containing %q", tc.spec, tc.zone, msg, tc.want)
		}
	}
}

// The refusal of a zone offers an example that is a valid zone and not the
// one refused: without zone data even "Europe/Berlin" is refused.
func TestUnknownZoneOffersAnotherZone(t *testing.T) {
	for _, name := range append([]string{"Mars/Olympus"}, zoneExamples...) {
		msg := unknownZone(name).Error()
		_, example, ok := strings.Cut(msg, "such as ")
		example, _, _ = strings.Cut(example, ",")
		zone, err := strconv.Unquote(example)
		if !ok || err != nil || zone == name || !strings.HasPrefix(msg, fmt.Sprintf("unknown time zone %q; ", name)) {
			t.Errorf("refusing %q: %q, want the zone named and another offered", name, msg)
			continue
		}
		mustLoad(t, zone)
	}
}

func TestSpecIsCanonical(t *testing.T) {
	for _, tc := range []struct{ spec, zone, want string }{
		{"0 2 * * *", "", "0 2 * * *"},
		{"  0\t2  *   * *  ", "", "0 2 * * *"},
		{"@daily", "", "0 0 * * *"},
		{"@MIDNIGHT", "", "0 0 * * *"},
		{"@hourly", "", "0 * * * *"},
		{"@weekly", "", "0 0 * * 0"},
		{"@monthly", "", "0 0 1 * *"},
		{"@yearly", "", "0 0 1 1 *"},
		{"@annually", "", "0 0 1 1 *"},
		{"0 0 * * THU", "", "0 0 * * thu"},
		{"0 9 * JAN-MAR Mon-Fri", "", "0 9 * jan-mar mon-fri"},
		{"0 2 * * *", "UTC", "0 2 * * *"},
		{"0 2 * * *", "Etc/UTC", "0 2 * * *"},
		{"CRON_TZ=UTC 0 2 * * *", "Etc/UTC", "0 2 * * *"},
		{"0 2 * * *", "Europe/Berlin", "CRON_TZ=Europe/Berlin 0 2 * * *"},
		{"TZ=Europe/Berlin 0 2 * * *", "", "CRON_TZ=Europe/Berlin 0 2 * * *"},
		{"CRON_TZ=Europe/Berlin   @daily", "Europe/Berlin", "CRON_TZ=Europe/Berlin 0 0 * * *"},
		{"@every 2s", "", "@every 2s"},
		{"@EVERY 90m", "", "@every 1h30m0s"},
		{"@every 5400s", "Europe/Berlin", "@every 1h30m0s"},
	} {
		s := mustParse(t, tc.spec, tc.zone)
		if got := s.Spec(); got != tc.want {
			t.Errorf("Parse(%q, %q).Spec() = %q, want %q", tc.spec, tc.zone, got, tc.want)
		}
		if again := mustParse(t, s.Spec(), ""); again.Spec() != s.Spec() {
			t.Errorf("Spec %q parses back as %q", s.Spec(), again.Spec())
		}
	}
}

// at builds an instant from a wall time in loc; the tables use it only for
// wall times that occur once, and give DST instants in UTC.
func at(loc *time.Location, y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, loc)
}

func TestDueTimes(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	ny := mustLoad(t, "America/New_York")
	beirut := mustLoad(t, "Asia/Beirut")
	utc := time.UTC
	u := func(y int, mo time.Month, d, h, mi int) time.Time { return at(utc, y, mo, d, h, mi) }
	for _, tc := range []struct {
		name, spec, zone string
		from             time.Time
		want             []time.Time
	}{
		{
			name: "Berlin spring forward: 02:30 does not exist and runs once at 03:00 CEST",
			spec: "30 2 * * *", zone: "Europe/Berlin",
			from: at(berlin, 2026, 3, 28, 0, 0),
			want: []time.Time{u(2026, 3, 28, 1, 30), u(2026, 3, 29, 1, 0), u(2026, 3, 30, 0, 30)},
		},
		{
			name: "Berlin spring forward: two times in the gap and 03:00 itself run once together",
			spec: "0,30 2,3 * * *", zone: "Europe/Berlin",
			from: at(berlin, 2026, 3, 29, 0, 0),
			want: []time.Time{u(2026, 3, 29, 1, 0), u(2026, 3, 29, 1, 30), u(2026, 3, 30, 0, 0)},
		},
		{
			name: "Berlin fall back: 02:30 occurs twice and runs once, the first (CEST)",
			spec: "30 2 * * *", zone: "Europe/Berlin",
			from: at(berlin, 2026, 10, 24, 0, 0),
			want: []time.Time{u(2026, 10, 24, 0, 30), u(2026, 10, 25, 0, 30), u(2026, 10, 26, 1, 30)},
		},
		{
			name: "New York spring forward: 02:30 runs at 03:00 EDT",
			spec: "CRON_TZ=America/New_York 30 2 * * *",
			from: at(ny, 2026, 3, 7, 12, 0),
			want: []time.Time{u(2026, 3, 8, 7, 0), u(2026, 3, 9, 6, 30)},
		},
		{
			name: "New York fall back: 01:30 runs once, in EDT",
			spec: "30 1 * * *", zone: "America/New_York",
			from: at(ny, 2026, 10, 31, 0, 0),
			want: []time.Time{u(2026, 10, 31, 5, 30), u(2026, 11, 1, 5, 30), u(2026, 11, 2, 6, 30)},
		},
		{
			name: "New York fall back asked from inside the second 01:xx: next day",
			spec: "30 1 * * *", zone: "America/New_York",
			from: u(2026, 11, 1, 6, 10), // 01:10 EST
			want: []time.Time{u(2026, 11, 2, 6, 30)},
		},
		{
			name: "wildcard schedule follows the wall clock: gap times are not due",
			spec: "*/30 * * * *", zone: "Europe/Berlin",
			from: at(berlin, 2026, 3, 29, 0, 45),
			want: []time.Time{u(2026, 3, 29, 0, 0), u(2026, 3, 29, 0, 30), u(2026, 3, 29, 1, 0), u(2026, 3, 29, 1, 30)},
		},
		{
			name: "wildcard schedule in a repeated hour runs in both occurrences",
			spec: "*/30 * * * *", zone: "Europe/Berlin",
			from: at(berlin, 2026, 10, 25, 1, 45),
			want: []time.Time{u(2026, 10, 25, 0, 0), u(2026, 10, 25, 0, 30), u(2026, 10, 25, 1, 0), u(2026, 10, 25, 1, 30), u(2026, 10, 25, 2, 0)},
		},
		{
			name: "@hourly in New York's repeated hour: every real hour",
			spec: "@hourly", zone: "America/New_York",
			from: at(ny, 2026, 10, 31, 23, 30),
			want: []time.Time{u(2026, 11, 1, 4, 0), u(2026, 11, 1, 5, 0), u(2026, 11, 1, 6, 0), u(2026, 11, 1, 7, 0)},
		},
		{
			name: "@daily where midnight does not exist (Beirut): at 01:00 EEST",
			spec: "@daily", zone: "Asia/Beirut",
			from: at(beirut, 2026, 3, 28, 12, 0),
			want: []time.Time{u(2026, 3, 28, 22, 0), u(2026, 3, 29, 21, 0)},
		},
		{
			name: "@every is absolute across DST",
			spec: "@every 2h", zone: "Europe/Berlin",
			from: u(2026, 3, 29, 0, 1),
			want: []time.Time{u(2026, 3, 29, 2, 0), u(2026, 3, 29, 4, 0), u(2026, 3, 29, 6, 0)},
		},
		{
			name: "@every 90m counts from the epoch",
			spec: "@every 90m",
			from: u(1970, 1, 1, 0, 0),
			want: []time.Time{u(1970, 1, 1, 1, 30), u(1970, 1, 1, 3, 0), u(1970, 1, 1, 4, 30)},
		},
		{
			name: "leap days, 2100 is not one",
			spec: "0 0 29 2 *",
			from: u(2097, 1, 1, 0, 0),
			want: []time.Time{u(2104, 2, 29, 0, 0)},
		},
		{
			name: "leap days",
			spec: "0 12 29 feb *", zone: "Europe/Berlin",
			from: u(2026, 1, 1, 0, 0),
			want: []time.Time{u(2028, 2, 29, 11, 0), u(2032, 2, 29, 11, 0)},
		},
		{
			name: "day 31 only in months that have it",
			spec: "0 0 31 * *",
			from: u(2026, 1, 1, 0, 0),
			want: []time.Time{u(2026, 1, 31, 0, 0), u(2026, 3, 31, 0, 0), u(2026, 5, 31, 0, 0), u(2026, 7, 31, 0, 0), u(2026, 8, 31, 0, 0)},
		},
		{
			name: "both day fields restricted: either matches (Vixie cron)",
			spec: "0 0 13 * fri",
			from: u(2026, 2, 1, 0, 0),
			want: []time.Time{u(2026, 2, 6, 0, 0), u(2026, 2, 13, 0, 0), u(2026, 2, 20, 0, 0), u(2026, 2, 27, 0, 0), u(2026, 3, 6, 0, 0)},
		},
		{
			name: "day-of-week 7 is Sunday",
			spec: "0 0 * * 7",
			from: u(2026, 2, 1, 0, 0),
			want: []time.Time{u(2026, 2, 8, 0, 0), u(2026, 2, 15, 0, 0)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.zone)
			got := s.Between(tc.from, tc.want[len(tc.want)-1], 100)
			if !equalTimes(got, tc.want) {
				t.Fatalf("%s from %v:\n got %v\nwant %v", s.Spec(), tc.from, utcs(got), utcs(tc.want))
			}
		})
	}
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func utcs(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// TestInstancesAgree parses each schedule twice, as two instances would, and
// asks each from different instants: across a year with its transitions,
// every due time one finds the other finds too, and Next from any instant
// between two due times gives the later one.
func TestInstancesAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ spec, zone string }{
		{"30 2 * * *", "Europe/Berlin"},
		{"30 1 * * *", "America/New_York"},
		{"0,30 2,3 * * *", "Europe/Berlin"},
		{"*/15 * * * *", "America/New_York"},
		{"@hourly", "Europe/Berlin"},
		{"@daily", "Asia/Beirut"},
		{"0 0 31 * *", "Australia/Lord_Howe"},
		{"@every 7s", ""}, // over a year: a month of it is checked
		{"@every 97m", "Europe/Berlin"},
	} {
		a := mustParse(t, tc.spec, tc.zone)
		b := mustParse(t, strings.ToUpper(tc.spec[:1])+tc.spec[1:], tc.zone)
		all := a.Between(start, end, 400000)
		if len(all) < 2 {
			t.Fatalf("%s: %d due times in 2026", a.Spec(), len(all))
		}
		for i := 1; i < len(all); i++ {
			if !all[i].After(all[i-1]) {
				t.Fatalf("%s: %v then %v", a.Spec(), all[i-1], all[i])
			}
		}
		for range 2000 {
			i := rng.IntN(len(all) - 1)
			gap := all[i+1].Sub(all[i])
			from := all[i].Add(time.Duration(rng.Int64N(int64(gap))))
			got := b.Next(from.In(mustLoad(t, "Asia/Tokyo")))
			if !got.Equal(all[i+1]) {
				t.Fatalf("%s: instance B from %v got %v, instance A has %v", a.Spec(), from, got, all[i+1])
			}
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"": CatchUpLatest, "none": CatchUpNone, "latest": CatchUpLatest, "all": CatchUpAll} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParsePolicy("some")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not one of none, latest or all") {
		t.Errorf("ParsePolicy(some) = %v", err)
	}
}

// TestFarInstants: instants far from now neither overflow nor loop.
func TestFarInstants(t *testing.T) {
	far := time.Date(3000, 1, 1, 0, 0, 0, 1, time.UTC)
	if got := mustParse(t, "@every 1s", "").Next(far); !got.Equal(far.Add(time.Second - 1)) {
		t.Errorf("@every 1s after %v: %v", far, got)
	}
	s := mustParse(t, "0 0 29 2 *", "")
	p := s.Plan(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), far, CatchUp{Policy: CatchUpNone})
	if p.Collapsed.Count+int64(len(p.Missed)) == 0 || p.Through.After(far) {
		t.Errorf("leap days 1900..3000: %+v", p)
	}
}
