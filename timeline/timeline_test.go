package timeline

import (
	"slices"
	"testing"
	"time"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
)

var at = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

func mins(m float64) time.Time { return at.Add(time.Duration(m * float64(time.Minute))) }

// A window places times between 0 and 1, clamped, and is never empty.
func TestWindowPlacesTimes(t *testing.T) {
	w := NewWindow(at, mins(60))
	for m, want := range map[float64]float64{-5: 0, 0: 0, 15: 0.25, 60: 1, 90: 1} {
		if got := w.Fraction(mins(m)); got != want {
			t.Errorf("Fraction(%v min) = %v, want %v", m, got, want)
		}
	}
	if empty := NewWindow(at, at); empty.Span() != time.Second || empty.Fraction(at.Add(500*time.Millisecond)) != 0.5 {
		t.Errorf("a window from a time to itself is %v long", empty.Span())
	}
	if !w.Overlaps(mins(-10), mins(0)) || !w.Overlaps(mins(60), mins(70)) || w.Overlaps(mins(-10), mins(-1)) || w.Overlaps(mins(61), mins(62)) {
		t.Error("Overlaps does not keep exactly what touches the window")
	}
}

// Columns divide a window evenly and clamp times outside it to the edge
// columns; the period they draw ends at their last column's end.
func TestColumns(t *testing.T) {
	c := NewWindow(at, mins(60)).Columns(60)
	if c.Step != time.Minute || c.Of(mins(-1)) != 0 || c.Of(mins(59.9)) != 59 || c.Of(mins(120)) != 59 || c.Of(mins(30)) != 30 {
		t.Errorf("columns of a minute: step %v, of -1 min %d, 30 min %d, 120 min %d", c.Step, c.Of(mins(-1)), c.Of(mins(30)), c.Of(mins(120)))
	}
	odd := NewWindow(at, at.Add(time.Second)).Columns(7)
	if d := odd.Drawn(); !d.To.Equal(at.Add(7*odd.Step)) || d.To.After(at.Add(time.Second)) {
		t.Errorf("7 columns of a second draw %v to %v", d.From, d.To)
	}
}

// The axis ticks at the shortest round interval that leaves its labels
// room, at the multiples of it inside the window, written as that
// interval needs.
func TestAxisTicksAtRoundTimes(t *testing.T) {
	for _, tc := range []struct {
		unit   time.Duration
		gap    int
		every  time.Duration
		layout string
	}{
		{time.Second, 2, 10 * time.Second, "15:04:05"}, // 8 characters
		{time.Minute, 2, 10 * time.Minute, "15:04"},    // 7 minutes of room
		{time.Hour, 2, 12 * time.Hour, "15:04"},
		{6 * time.Hour, 2, 48 * time.Hour, "Jan 02"},
		{30 * 24 * time.Hour, 2, 240 * 24 * time.Hour, "Jan 02"}, // past every step: whole days
	} {
		every := Every(tc.unit, tc.gap)
		if every != tc.every || Layout(every) != tc.layout {
			t.Errorf("Every(%v, %d) = %v (%s), want %v (%s)", tc.unit, tc.gap, every, Layout(every), tc.every, tc.layout)
		}
	}
	w := NewWindow(mins(-7), mins(31))
	want := []time.Time{at, mins(10), mins(20), mins(30)}
	if got := w.Ticks(10 * time.Minute); !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("ticks every 10m from 07:53 to 08:31: %v, want %v", got, want)
	}
}

// Lanes are one per holder in the order the holders first ran, each with
// its runs by start; the scheduled times nobody ran are in none.
func TestLanes(t *testing.T) {
	runs := []inspect.Run{
		{Holder: "b", StartedAt: mins(20), Outcome: lease.OutcomeExited},
		{Holder: "a", StartedAt: mins(10), Outcome: lease.OutcomeExited},
		{Holder: "", StartedAt: mins(5), Outcome: lease.OutcomeMissed},
		{Holder: "b", StartedAt: mins(0), Outcome: lease.OutcomeSkipped},
		{Holder: "a", StartedAt: mins(30), Outcome: lease.OutcomeLost},
		{Holder: "b", StartedAt: mins(10), Outcome: lease.OutcomeExited},
	}
	got := Lanes(runs)
	want := []Lane{{Holder: "a", Runs: []int{1, 4}}, {Holder: "b", Runs: []int{5, 0}}}
	if !slices.EqualFunc(got, want, func(x, y Lane) bool { return x.Holder == y.Holder && slices.Equal(x.Runs, y.Runs) }) {
		t.Errorf("Lanes = %+v, want %+v", got, want)
	}
}
