package web

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/timeline"
)

// The timeline's geometry, in the SVG's own units: the browser scales the
// whole drawing to the page's width, a phone's included.
const (
	tlWidth    = 1000.0
	tlLabel    = 150.0 // the holders' names
	tlRight    = 10.0
	tlPlot     = tlWidth - tlLabel - tlRight // the width the window is drawn over
	tlLane     = 24.0                        // height of one holder's lane
	tlBox      = 16.0                        // height of a run's box in it
	tlAxis     = 34.0                        // the time axis under the lanes, with the marks of times not run
	tlMinWidth = 3.0                         // a run shorter than this is drawn this wide, unless that would meet the next run
	tlManual   = 4.0                         // the radius of a manual run's marker
	// tlChar is the width of a character of an axis label (11px in the
	// SVG's units), and tlGap the characters left between two labels.
	tlChar = 6.5
	tlGap  = 6
)

// drawTimeline writes the SVG: a lane per holder with a box per run from
// its start to its finish, and the axis with the scheduled times that
// were missed or skipped.
func drawTimeline(b *html, page jobPage) {
	ls := timeline.Lanes(page.Runs)
	win := timeline.NewWindow(page.From, page.Now)
	// Coordinates are rounded as they are written (one decimal), before
	// widths are worked out from them: a box then ends exactly where its
	// numbers say.
	x := func(t time.Time) float64 {
		return math.Round((tlLabel+tlPlot*win.Fraction(t))*10) / 10
	}
	height := float64(len(ls))*tlLane + tlAxis
	b.raw(`<figure class="timeline"><svg id="timeline" role="img" aria-label="runs by holder over time" viewBox="0 0 `)
	b.num(tlWidth)
	b.raw(` `)
	b.num(height)
	b.raw(`" preserveAspectRatio="xMinYMin meet">`)

	// The next start of any run of the same slot caps a short run's
	// widened box, so that runs that did not overlap are never drawn as
	// if they had.
	nextStart := nextStarts(page.Runs)
	for i, l := range ls {
		y := float64(i) * tlLane
		b.raw(`<g class="lane" data-holder="`)
		b.attr(l.Holder)
		b.raw(`"><text class="holder" x="4" y="`)
		b.num(y + tlLane/2 + 4)
		b.raw(`">`)
		b.text(short(l.Holder, 22))
		b.raw(`<title>`)
		b.text(l.Holder)
		b.raw(`</title></text><line class="lane-line" x1="`)
		b.num(tlLabel)
		b.raw(`" x2="`)
		b.num(tlWidth - tlRight)
		b.raw(`" y1="`)
		b.num(y + tlLane - 0.5)
		b.raw(`" y2="`)
		b.num(y + tlLane - 0.5)
		b.raw(`"/>`)
		for _, i := range l.Runs {
			r := page.Runs[i]
			x0, w := boxSpan(r, nextStart[i], x)
			runBox(b, page, r, x0, y+(tlLane-tlBox)/2, w)
		}
		b.raw(`</g>`)
	}
	axis(b, page, win, float64(len(ls))*tlLane, x)
	b.raw(`</svg><figcaption>`)
	swatches(b)
	b.raw(`</figcaption></figure>`)
}

// boxSpan is where run r's box starts on the timeline's x scale, and its
// width: at least tlMinWidth, unless that would meet next, the start of the
// next run of its slot (zero: none).
func boxSpan(r inspect.Run, next time.Time, x func(time.Time) float64) (x0, w float64) {
	x0, x1 := x(r.StartedAt), x(r.FinishedAt)
	w = x1 - x0
	if w < tlMinWidth {
		w = tlMinWidth
		if !next.IsZero() && !next.Before(r.FinishedAt) {
			w = max(x1-x0, min(w, x(next)-x0))
		}
	}
	return x0, w
}

// nextStarts gives, for each run, the start of the next run of the same
// slot (zero for the last). A scheduled time not run is no run: it is a
// mark on the axis, and a run's box may cover its time.
func nextStarts(runs []inspect.Run) []time.Time {
	order := make([]int, 0, len(runs))
	for i := range runs {
		if !notRun(runs[i]) {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(runs[a].Slot, runs[b].Slot), runs[a].StartedAt.Compare(runs[b].StartedAt), cmp.Compare(a, b))
	})
	next := make([]time.Time, len(runs))
	for k := 0; k+1 < len(order); k++ {
		if a, b := order[k], order[k+1]; runs[a].Slot == runs[b].Slot {
			next[a] = runs[b].StartedAt
		}
	}
	return next
}

// runBox writes one run: a link that selects it, around a box coloured by
// outcome, with the run's facts as data attributes (for the script and
// for tests) and as a title (the tooltip without script).
func runBox(b *html, page jobPage, r inspect.Run, x, y, w float64) {
	kind := kindOf(r)
	runLink(b, page, r, "run", kind)
	b.raw(`" data-holder="`)
	b.attr(r.Holder)
	b.raw(`" data-slot="`)
	b.int(int64(r.Slot))
	b.raw(`" data-token="`)
	b.int(r.FencingToken)
	b.raw(`" data-attempt="`)
	b.int(int64(r.Attempt))
	b.raw(`" data-exit="`)
	if r.ExitCode != nil {
		b.int(int64(*r.ExitCode))
	}
	b.raw(`" data-start="`)
	b.stamp(r.StartedAt)
	b.raw(`" data-end="`)
	b.stamp(r.FinishedAt)
	b.raw(`"><rect class="k-`)
	b.raw(kind)
	b.raw(`" x="`)
	b.num(x)
	b.raw(`" y="`)
	b.num(y)
	b.raw(`" width="`)
	b.num(w)
	b.raw(`" height="`)
	b.num(tlBox)
	b.raw(`"/>`)
	manual := r.Origin == inspect.OriginManual
	if manual {
		b.raw(`<circle class="manual" cx="`)
		b.num(x)
		b.raw(`" cy="`)
		b.num(y)
		b.raw(`" r="`)
		b.num(tlManual)
		b.raw(`"/>`)
	}
	b.raw(`<title>`)
	if manual {
		b.raw(`manual run, `)
	}
	b.raw(kind)
	b.raw(`, holder `)
	b.text(r.Holder)
	b.raw(`, token `)
	b.int(r.FencingToken)
	b.raw(`, attempt `)
	b.int(int64(r.Attempt))
	b.raw(`, exit `)
	exitCode(b, r.ExitCode)
	b.raw(`, `)
	b.clock(r.StartedAt, ' ')
	b.raw(` to `)
	b.clock(r.FinishedAt, ' ')
	b.raw(` UTC</title></a>`)
}

// runLink opens the link that selects r, up to its data-outcome
// attribute's value, whose quote the caller closes.
func runLink(b *html, page jobPage, r inspect.Run, class, kind string) {
	b.raw(`<a class="`)
	b.raw(class)
	b.raw(`" href="`)
	selectLink(b, page, r)
	b.raw(`" data-outcome="`)
	b.raw(kind)
}

// axis writes the time axis at y: ticks with UTC times, and a mark for
// each scheduled time that was missed or skipped.
func axis(b *html, page jobPage, win timeline.Window, y float64, x func(time.Time) float64) {
	b.raw(`<g class="axis"><line x1="`)
	b.num(tlLabel)
	b.raw(`" x2="`)
	b.num(tlWidth - tlRight)
	b.raw(`" y1="`)
	b.num(y + 8)
	b.raw(`" y2="`)
	b.num(y + 8)
	b.raw(`"/>`)
	// One character of a label covers this much of the window.
	unit := time.Duration(float64(win.Span()) * tlChar / tlPlot)
	every := timeline.Every(unit, tlGap)
	layout := timeline.Layout(every)
	for _, t := range win.Ticks(every) {
		tx := x(t)
		b.raw(`<line class="tick" x1="`)
		b.num(tx)
		b.raw(`" x2="`)
		b.num(tx)
		b.raw(`" y1="0" y2="`)
		b.num(y + 12)
		b.raw(`"/><text class="tick-label" x="`)
		b.num(tx)
		b.raw(`" y="`)
		b.num(y + 26)
		b.raw(`">`)
		b.buf = t.AppendFormat(b.buf, layout)
		b.raw(`</text>`)
	}
	for _, r := range page.Runs {
		if !notRun(r) {
			continue
		}
		kind := kindOf(r)
		at := scheduledAt(r)
		runLink(b, page, r, "mark", kind)
		b.raw(`" data-start="`)
		b.stamp(at)
		b.raw(`"><path class="k-`)
		b.raw(kind)
		b.raw(`" d="M`)
		b.num(x(at))
		b.raw(` `)
		b.num(y + 8)
		b.raw(`l-5 -8h10z"/><title>`)
		b.raw(kind)
		b.raw(` scheduled time `)
		b.clock(at, ' ')
		b.raw(` UTC</title></a>`)
	}
	b.raw(`</g>`)
}

// scheduledAt is the scheduled time a missed or skipped row stands for;
// a row that does not record it was started at that time.
func scheduledAt(r inspect.Run) time.Time {
	if r.ScheduledAt != nil {
		return *r.ScheduledAt
	}
	return r.StartedAt
}

// swatches name the colours, each with its meaning as its title; the
// page's legend says them all.
func swatches(b *html) {
	for _, k := range kinds {
		b.raw(`<span class="key" title="`)
		b.attr(k.meaning)
		b.raw(`"><span class="swatch k-`)
		b.raw(k.name)
		b.raw(`"></span>`)
		b.raw(k.name)
		b.raw(`</span> `)
	}
	b.raw(`<span class="key"><span class="swatch manual"></span>manual run (leasewrap trigger)</span> <a href="#legend">what these mean</a>`)
}

// short cuts s to n characters for a label; the title has it whole.
func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
