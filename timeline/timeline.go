// Package timeline is the model both drawings of runs over time share:
// `leasewrap history --timeline` (text, one character a column) and the
// web page's SVG. It decides the window a drawing covers, where a time
// falls in it, which round times the axis names and how they are written,
// and which runs go in which holder's lane; each renderer only draws.
package timeline

import (
	"cmp"
	"slices"
	"time"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
)

// Window is the period a timeline draws, From to To.
type Window struct{ From, To time.Time }

// NewWindow is the window [from, to]; a to not after from gives a window
// of one second, so that every position in it is defined.
func NewWindow(from, to time.Time) Window {
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	return Window{From: from, To: to}
}

// Earliest is the earliest start of runs, the zero time for none.
func Earliest(runs []inspect.Run) time.Time {
	var t time.Time
	for _, r := range runs {
		if t.IsZero() || r.StartedAt.Before(t) {
			t = r.StartedAt
		}
	}
	return t
}

// Fit narrows w to what is in it when it starts long before the earliest
// start: From moves to a twentieth of the rest of the window (at least a
// second) before earliest. Runs of seconds that a day's window would draw
// a pixel wide then fill the drawing. A zero earliest (no runs), or one at
// or before From, leaves w as it is.
func (w Window) Fit(earliest time.Time) Window {
	if earliest.IsZero() || !earliest.After(w.From) || !earliest.Before(w.To) {
		return w
	}
	from := earliest.Add(-max(w.To.Sub(earliest)/20, time.Second))
	if from.Before(w.From) {
		return w
	}
	return NewWindow(from, w.To)
}

// Span is the window's length.
func (w Window) Span() time.Duration { return w.To.Sub(w.From) }

// Fraction is where t falls in the window: 0 at From, 1 at To, and
// clamped to that range outside it.
func (w Window) Fraction(t time.Time) float64 {
	f := float64(t.Sub(w.From)) / float64(max(w.Span(), 1))
	return min(max(f, 0), 1)
}

// Overlaps reports whether something from start to end shows in the
// window: it does unless it ended before From or started after To.
func (w Window) Overlaps(start, end time.Time) bool {
	return !end.Before(w.From) && !start.After(w.To)
}

// Ticks are the times in [From, To) that are multiples of every in UTC:
// the times an axis ticked every that long names.
func (w Window) Ticks(every time.Duration) []time.Time {
	var out []time.Time
	for t := w.From.UTC().Truncate(every); t.Before(w.To); t = t.Add(every) {
		if !t.Before(w.From) {
			out = append(out, t)
		}
	}
	return out
}

// Columns divides a window into N columns of Step each, as a terminal
// draws it. Step is the window's span over N, rounded down to the
// nanosecond, so the columns end at Drawn().To, at most N ns before To.
type Columns struct {
	Window
	N    int
	Step time.Duration
}

// Columns divides w into n columns.
func (w Window) Columns(n int) Columns {
	return Columns{Window: w, N: n, Step: w.Span() / time.Duration(n)}
}

// Of is the column t falls in, clamped to the first and last.
func (c Columns) Of(t time.Time) int {
	return min(max(int(t.Sub(c.From)/max(c.Step, 1)), 0), c.N-1)
}

// Start is the time column i starts at.
func (c Columns) Start(i int) time.Time { return c.From.Add(c.Step * time.Duration(i)) }

// Drawn is the period the columns cover: From to the end of the last.
func (c Columns) Drawn() Window { return Window{From: c.From, To: c.Start(c.N)} }

// Steps are the intervals an axis may name times at: round ones, so that
// the labels read as a regular scale.
var Steps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// Layout is how an axis ticked every d writes its times (in UTC): the
// date for days, the seconds only when they change between ticks.
func Layout(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return "Jan 02"
	case d < time.Minute:
		return "15:04:05"
	}
	return "15:04"
}

// Every is the interval an axis ticks at when one character of a label
// covers unit of time and labels need gap characters between them: the
// shortest of Steps that leaves room for its label and the gap, or for a
// window too long for any, the multiple of days that does.
func Every(unit time.Duration, gap int) time.Duration {
	room := func(d time.Duration) time.Duration { return unit * time.Duration(len(Layout(d))+gap) }
	for _, d := range Steps {
		if d >= room(d) {
			return d
		}
	}
	const day = 24 * time.Hour
	return (room(day) + day - 1) / day * day
}

// Lane is one holder's row of a timeline.
type Lane struct {
	Holder string
	// Runs are indexes in the runs the lanes were made of, oldest start
	// first (the earlier index first for runs started together).
	Runs []int
}

// Lanes groups runs by holder, one lane each in the order the holders
// first ran, leaving out the scheduled times nobody ran (lease.NotRun):
// they are no one's runs, and a drawing marks them apart. It sorts
// indexes, not runs: a window may hold tens of thousands.
func Lanes(runs []inspect.Run) []Lane {
	ran := make([]int, 0, len(runs))
	for i := range runs {
		if !lease.NotRun(runs[i].Outcome) {
			ran = append(ran, i)
		}
	}
	slices.SortFunc(ran, func(a, b int) int { return cmp.Or(runs[a].StartedAt.Compare(runs[b].StartedAt), cmp.Compare(a, b)) })
	var out []Lane
	index := map[string]int{}
	for _, i := range ran {
		l, ok := index[runs[i].Holder]
		if !ok {
			l = len(out)
			index[runs[i].Holder] = l
			out = append(out, Lane{Holder: runs[i].Holder})
		}
		out[l].Runs = append(out[l].Runs, i)
	}
	return out
}
