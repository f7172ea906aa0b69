package schedule

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// t0 is a due time of "@every 2s" and of "* * * * *".
var t0 = time.Unix(1_800_000_000, 0).UTC()

func secs(ns ...int) []time.Time {
	out := make([]time.Time, len(ns))
	for i, n := range ns {
		out[i] = t0.Add(time.Duration(n) * time.Second)
	}
	return out
}

func span(n int) []int {
	out := make([]int, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, 2*i)
	}
	return out
}

func TestPlanEvery2s(t *testing.T) {
	s := mustParse(t, "@every 2s", "")
	onTime := t0.Add(20*time.Second + 300*time.Millisecond) // 0.3s after T0+20s: under the 1s grace
	late := t0.Add(21*time.Second + 500*time.Millisecond)   // 1.5s after T0+20s
	for _, tc := range []struct {
		name      string
		last, now time.Time
		c         CatchUp
		run       []time.Time
		missed    []time.Time
		collapsed Span
	}{
		{name: "none, latest on time: it runs, the outage is missed",
			last: t0, now: onTime, c: CatchUp{Policy: CatchUpNone},
			run: secs(20), missed: secs(span(9)...)},
		{name: "none, all late: nothing runs",
			last: t0, now: late, c: CatchUp{Policy: CatchUpNone},
			missed: secs(span(10)...)},
		{name: "latest, all late: the latest runs once",
			last: t0, now: late, c: CatchUp{Policy: CatchUpLatest},
			run: secs(20), missed: secs(span(9)...)},
		{name: "latest, latest on time: it is the one run, every late time is missed",
			last: t0, now: onTime, c: CatchUp{Policy: CatchUpLatest},
			run: secs(20), missed: secs(span(9)...)},
		{name: "latest, the latest is outside the window: nothing runs",
			last: t0, now: late, c: CatchUp{Policy: CatchUpLatest, Window: time.Second},
			missed: secs(span(10)...)},
		{name: "all: every late time in order",
			last: t0, now: late, c: CatchUp{Policy: CatchUpAll},
			run: secs(span(10)...)},
		{name: "all: what is outside the window stays missed",
			last: t0, now: late, c: CatchUp{Policy: CatchUpAll, Window: 5 * time.Second},
			run: secs(18, 20), missed: secs(span(8)...)},
		{name: "all, latest on time: late ones in the window, then it",
			last: t0, now: onTime, c: CatchUp{Policy: CatchUpAll, Window: 5 * time.Second},
			run: secs(16, 18, 20), missed: secs(span(7)...)},
		{name: "a long list of missed times is summarised",
			last: t0, now: late, c: CatchUp{Policy: CatchUpNone, MaxMissed: 3},
			missed: secs(16, 18, 20), collapsed: Span{Count: 7, First: t0.Add(2 * time.Second), Last: t0.Add(14 * time.Second)}},
		{name: "no history: only the window is looked at",
			now: late, c: CatchUp{Policy: CatchUpAll, Window: 5 * time.Second},
			run: secs(18, 20)},
		{name: "nothing due",
			last: t0.Add(20 * time.Second), now: late, c: CatchUp{Policy: CatchUpAll}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := s.Plan(tc.last, tc.now, tc.c)
			if !equalTimes(p.Run, tc.run) || !equalTimes(p.Missed, tc.missed) || p.Collapsed != tc.collapsed {
				t.Fatalf("Plan(%v, %v, %+v):\n run %v want %v\n missed %v want %v\n collapsed %+v want %+v",
					tc.last, tc.now, tc.c, utcs(p.Run), utcs(tc.run), utcs(p.Missed), utcs(tc.missed), p.Collapsed, tc.collapsed)
			}
		})
	}
}

// TestPlanLongOutage: @every 1s after 30 days down is 2,592,000 missed times;
// the plan lists 100 and summarises the rest, in a bounded number of
// allocations.
func TestPlanLongOutage(t *testing.T) {
	s := mustParse(t, "@every 1s", "")
	now := t0.Add(30*24*time.Hour + 600*time.Millisecond)
	var p Plan
	allocs := testing.AllocsPerRun(10, func() { p = s.Plan(t0, now, CatchUp{}) })
	if allocs > 10 {
		t.Errorf("Plan allocated %.0f times, want at most 10", allocs)
	}
	latest := t0.Add(30 * 24 * time.Hour)
	want := Span{Count: 30*24*3600 - 101, First: t0.Add(time.Second), Last: latest.Add(-101 * time.Second)}
	if p.Collapsed != want || len(p.Missed) != 100 || !p.Missed[0].Equal(want.Last.Add(time.Second)) ||
		!equalTimes(p.Run, []time.Time{latest}) || !p.Through.Equal(latest) {
		t.Fatalf("plan: collapsed %+v (want %+v), %d missed from %v, run %v, through %v",
			p.Collapsed, want, len(p.Missed), p.Missed[0], utcs(p.Run), p.Through)
	}

	c := mustParse(t, "* * * * *", "")
	p = c.Plan(t0, t0.Add(30*24*time.Hour+90*time.Second), CatchUp{Policy: CatchUpNone})
	want = Span{Count: 30*24*60 + 1 - 100, First: t0.Add(time.Minute), Last: t0.Add(30*24*time.Hour - 99*time.Minute)}
	if p.Collapsed != want || len(p.Missed) != 100 || len(p.Run) != 0 {
		t.Fatalf("cron plan: collapsed %+v (want %+v), %d missed, run %v", p.Collapsed, want, len(p.Missed), utcs(p.Run))
	}
}

// TestPlanAllInSteps: with policy all, a plan holds at most MaxRuns runs and
// planning again from Through gives the rest, each time once.
func TestPlanAllInSteps(t *testing.T) {
	s := mustParse(t, "@every 1s", "")
	now := t0.Add(1000*time.Second + 600*time.Millisecond)
	var ran []time.Time
	last := t0
	for range 20 {
		p := s.Plan(last, now, CatchUp{Policy: CatchUpAll, MaxRuns: 100})
		if len(p.Missed) != 0 || p.Collapsed.Count != 0 || len(p.Run) > 100 {
			t.Fatalf("plan from %v: %d missed, %+v, %d runs", last, len(p.Missed), p.Collapsed, len(p.Run))
		}
		ran = append(ran, p.Run...)
		if p.Through.Equal(last) {
			break
		}
		last = p.Through
	}
	if want := s.Between(t0, now, 2000); !equalTimes(ran, want) {
		t.Fatalf("ran %d times, want the %d due times in order", len(ran), len(want))
	}
}

// TestPlanAccountsForEachTimeOnce checks on random outages that every due
// time up to Through is in exactly one of Collapsed, Missed and Run, in
// order, and that nothing late runs from outside the window.
func TestPlanAccountsForEachTimeOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, spec := range []struct{ spec, zone string }{
		{"@every 37s", ""}, {"@every 7m", ""}, {"*/5 * * * *", "Europe/Berlin"}, {"30 2 * * *", "America/New_York"},
	} {
		s := mustParse(t, spec.spec, spec.zone)
		for range 300 {
			last := t0.Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))
			now := last.Add(time.Duration(rng.Int64N(int64(72 * time.Hour))))
			c := CatchUp{
				Policy:    []Policy{CatchUpNone, CatchUpLatest, CatchUpAll}[rng.IntN(3)],
				Window:    time.Duration(rng.Int64N(int64(24*time.Hour))) + time.Second,
				MaxRuns:   1 + rng.IntN(50),
				MaxMissed: 1 + rng.IntN(50),
			}
			p := s.Plan(last, now, c)
			var got []time.Time
			if p.Collapsed.Count > 0 {
				got = s.Between(p.Collapsed.First.Add(-time.Nanosecond), p.Collapsed.Last, 1<<20)
				if int64(len(got)) != p.Collapsed.Count {
					t.Fatalf("%s: collapsed %+v holds %d times", s.Spec(), p.Collapsed, len(got))
				}
			}
			got = append(got, p.Missed...)
			got = append(got, p.Run...)
			slices.SortFunc(got, func(a, b time.Time) int { return a.Compare(b) })
			want := s.Between(last, p.Through, 1<<20)
			if p.Through.After(now) || !equalTimes(got, want) {
				t.Fatalf("%s Plan(%v, %v, %+v): accounted %d times, due %d, through %v",
					s.Spec(), last, now, c, len(got), len(want), p.Through)
			}
			for i, r := range p.Run {
				if now.Sub(r) > c.Window && i != len(p.Run)-1 {
					t.Fatalf("%s Plan(%v, %v, %+v): runs %v from outside the window", s.Spec(), last, now, c, r)
				}
			}
		}
	}
}

// Count agrees with the summary a plan makes of a long outage, and counts
// the due times in (from, to] of either kind of schedule.
func TestCountIsWhatASummaryStandsFor(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []string{"@every 1s", "*/15 * * * *"} {
		s := mustParse(t, spec, "")
		p := s.Plan(at, at.Add(48*time.Hour), CatchUp{Policy: CatchUpNone})
		if got := s.Count(p.Collapsed.First.Add(-time.Nanosecond), p.Collapsed.Last); got != p.Collapsed.Count || got == 0 {
			t.Errorf("%s: Count over the summary %+v = %d, want its count", spec, p.Collapsed, got)
		}
	}
	s := mustParse(t, "*/15 * * * *", "")
	for _, tc := range []struct {
		from, to time.Duration
		want     int64
	}{{0, 2 * time.Hour, 8}, {-time.Nanosecond, 2 * time.Hour, 9}, {time.Minute, 14 * time.Minute, 0}, {time.Hour, 0, 0}} {
		if got := s.Count(at.Add(tc.from), at.Add(tc.to)); got != tc.want {
			t.Errorf("Count(+%s, +%s) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}
