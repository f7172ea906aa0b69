package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/timeline"
)

// jobPage is what /jobs/NAME shows.
type jobPage struct {
	Job        string
	From, Now  time.Time
	SinceParam string // as the viewer gave it, kept in the page's links
	// Fitted says From was moved up to the runs of DefaultWindow, as the
	// page does without ?since= (timeline.Window.Fit).
	Fitted bool
	// Runs are the runs in the window, newest start first, those running
	// now (Outcome kindRunning, finishing now) included, and the
	// scheduled times that were not run (notRun), at their time.
	Runs []inspect.Run
	// Ran and NotRun count Runs: the runs, and the times not run.
	Ran, NotRun int
	Truncated   bool // more than MaxRuns finished in the window
	Selected    *inspect.Run
	// Output is the selected run's kept output, nil when it kept none or
	// the pages hide kept output.
	Output []byte
	// ShowOutput is the pages' WithOutput.
	ShowOutput bool
	// Refresh is ?refresh=: seconds between the page's reloads, 0 for none.
	Refresh int
	// Verdict is the job's state as check, status and the exporter show
	// it; unknown when the history could not be read.
	Verdict inspect.Verdict
	// Lease is the job's lease now: state, holders, schedule, next time.
	Lease leaseView
}

// runID names a run in a page's links: slot, fencing token and attempt,
// which together no other run of the job has.
func runID(r inspect.Run) string {
	return strconv.Itoa(max(r.Slot, 1)) + "-" + strconv.FormatInt(r.FencingToken, 10) + "-" + strconv.Itoa(max(r.Attempt, 1))
}

// jobPath is the path segment of a job's page: the name escaped so that
// a "/" or "?" in it stays part of the name.
func jobPath(job string) string { return url.PathEscape(job) }

// parseSince reads ?since=: a duration back from now (90m, 24h, 7d) or a
// date or time (UTC unless it says).
func parseSince(text string, now time.Time) (time.Time, error) {
	if text == "" {
		return now.Add(-DefaultWindow), nil
	}
	if days, ok := strings.CutSuffix(text, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 && n <= 3660 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(text); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, text, time.UTC); err == nil && t.Before(now) {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid since %q: want a duration such as 24h, 90m or 7d, or a past date or time such as 2026-03-01 or 2026-03-01T08:00:00Z", text)
}

// readJob reads /jobs/NAME's page in a bounded number of statements: the
// job's lease rows, its runs in the window, and the selected run's output.
func (p *Pages) readJob(ctx context.Context, job string, q url.Values) (jobPage, error) {
	now := p.now()
	page := jobPage{Job: job, Now: now, SinceParam: q.Get("since"), ShowOutput: p.output}
	var err error
	if page.From, err = parseSince(page.SinceParam, now); err != nil {
		return page, &badRequest{err}
	}
	if page.Refresh, err = parseRefresh(q.Get("refresh")); err != nil {
		return page, err
	}
	if err := lease.CheckJob(job); err != nil {
		return page, &badRequest{err}
	}
	statuses, err := p.src.Status(ctx, job)
	if err != nil {
		return page, err
	}
	for _, s := range statuses {
		page.Lease.add(s, now)
	}
	runs, err := p.src.History(ctx, inspect.HistoryQuery{Job: job, Since: page.From, Limit: MaxRuns + 1})
	if err != nil && !errors.Is(err, inspect.ErrNoHistory) {
		return page, err
	}
	page.Verdict = inspect.Verdict{Job: job, State: inspect.StateUnknown, Reason: "no run history to judge it by"}
	if err == nil {
		js, err := p.src.Summary(ctx, job, DefaultWindow)
		if err != nil && !errors.Is(err, lease.ErrNoJob) {
			return page, err
		}
		if err == nil {
			page.Verdict = js.Verdict
		}
	}
	page.Lease.judged(page.Verdict)
	if len(runs) > MaxRuns {
		runs, page.Truncated = runs[:MaxRuns], true
	}
	page.place(append(inspect.Running(statuses, now), runs...))
	if id := q.Get("run"); id != "" {
		for i := range page.Runs {
			if runID(page.Runs[i]) == id {
				page.Selected = &page.Runs[i]
				break
			}
		}
	}
	if r := page.Selected; r != nil && r.OutputBytes > 0 && page.ShowOutput {
		out, _, _, err := p.src.Output(ctx, inspect.OutputQuery{Job: job, FencingToken: r.FencingToken, Attempt: max(r.Attempt, 1)})
		switch {
		case err == nil:
			page.Output = out
		case !errors.Is(err, inspect.ErrNoOutput): // pruned since: shown as none
			return page, err
		}
	}
	return page, nil
}

// place puts runs on the page: newest start first (the history gives
// them newest finish first), counted as runs and times not run, and
// without ?since= in the default window narrowed to them.
func (page *jobPage) place(runs []inspect.Run) {
	slices.SortStableFunc(runs, func(a, b inspect.Run) int { return b.StartedAt.Compare(a.StartedAt) })
	page.Runs = runs
	for i := range runs {
		if notRun(runs[i]) {
			page.NotRun++
		}
	}
	page.Ran = len(runs) - page.NotRun
	if page.SinceParam == "" && !page.Truncated {
		fit := timeline.NewWindow(page.From, page.Now).Fit(timeline.Earliest(runs))
		page.From, page.Fitted = fit.From, !fit.From.Equal(page.From)
	}
}

func (p *Pages) serveJob(w http.ResponseWriter, r *http.Request) {
	job := r.PathValue("name")
	// The page is at jobs/NAME, NAME one segment as the pages link it (a
	// "/" in it escaped): "../" is /, with a reverse proxy's prefix kept
	// in front of it.
	const root = "../"
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	page, err := p.readJob(ctx, job, r.URL.Query())
	var body []byte
	if err == nil {
		body = renderJob(page, root)
	}
	p.answer(w, r, root, body, err)
}

// renderJob writes /jobs/NAME: the timeline, the selected run, the table.
func renderJob(page jobPage, root string) []byte {
	b := html{buf: make([]byte, 0, 4096+len(page.Runs)*900), refresh: page.Refresh}
	b.head("leasewrap: "+page.Job, root)
	b.raw(`<header><p class="crumb"><a href="`)
	b.attr(root)
	b.raw(`">All jobs</a></p><h1 class="job-name">`)
	b.text(page.Job)
	b.raw(`</h1><p class="sub">`)
	b.count(page.Ran, "run", "runs")
	if page.NotRun > 0 {
		b.raw(` and `)
		b.count(page.NotRun, "scheduled time", "scheduled times")
		b.raw(` not run`)
	}
	b.raw(` from `)
	b.time(page.From)
	b.raw(` to `)
	b.time(page.Now)
	b.raw(` UTC`)
	if page.Fitted {
		b.raw(` (the default window, narrowed to its runs)`)
	}
	if page.Truncated {
		b.raw(` (the newest `)
		b.int(MaxRuns)
		b.raw(` only)`)
	}
	b.raw(`</p><p class="verdict">`)
	health(&b, page.Verdict)
	b.raw(` `)
	reason(&b, page.Verdict)
	b.raw(`</p>`)
	leaseFacts(&b, page.Lease)
	b.raw(`<nav class="windows">`)
	for _, w := range []string{"1h", "6h", "24h", "7d", "30d"} {
		b.raw(`<a href="?since=`)
		b.raw(w)
		b.raw(`">`)
		b.raw(w)
		b.raw(`</a> `)
	}
	b.raw(`</nav>`)
	refreshControl(&b, page.SinceParam, page.Refresh)
	b.raw(`</header><main>`)
	drawTimeline(&b, page)
	b.raw(`<div id="detail" class="detail" aria-live="polite"></div>`)
	selected(&b, page)
	runTable(&b, page)
	legend(&b)
	b.raw(`</main>`)
	b.foot()
	return b.buf
}

// leaseFacts writes the job's lease now: its state, holders, schedule,
// next scheduled time, pause and queue.
func leaseFacts(b *html, l leaseView) {
	b.raw(`<dl class="facts"><dt>Lease</dt><dd>`)
	state(b, string(l.State))
	if l.Slots > 1 {
		b.raw(` <span class="slots">`)
		b.int(int64(l.Slots))
		b.raw(` slots</span>`)
	}
	b.raw(`</dd><dt>Holders</dt><dd class="holder">`)
	holders(b, l.Holders)
	b.raw(`</dd><dt>Schedule</dt><dd>`)
	if l.Schedule == "" {
		b.raw(`none (runs when started)`)
	} else {
		b.raw(`<code>`)
		b.text(l.Schedule)
		b.raw(`</code>`)
	}
	b.raw(`</dd><dt>Next</dt><dd>`)
	if l.Next == nil {
		b.raw(`—`)
	} else {
		b.time(*l.Next)
		b.raw(` UTC`)
	}
	if p := l.Paused; p != nil {
		b.raw(`</dd><dt>Paused</dt><dd class="paused">by `)
		b.text(p.By)
		if !p.Until.IsZero() {
			b.raw(` until `)
			b.time(p.Until)
			b.raw(` UTC`)
		}
		if p.Reason != "" {
			b.raw(`: `)
			b.text(p.Reason)
		}
	}
	if len(l.Queue) > 0 {
		b.raw(`</dd><dt>Queue</dt><dd>`)
		queue(b, l.Queue)
	}
	b.raw(`</dd></dl>`)
}

// selectLink writes the href that selects run r on this page.
func selectLink(b *html, page jobPage, r inspect.Run) {
	b.raw(`?`)
	if page.SinceParam != "" {
		b.raw(`since=`)
		b.attr(url.QueryEscape(page.SinceParam))
		b.raw(`&amp;`)
	}
	b.raw(`run=`)
	b.raw(runID(r))
	b.raw(`#selected`)
}

// notRunRow writes a scheduled time that was not run as what it is: its
// time and why, with none of a run's facts.
func notRunRow(b *html, page jobPage, r inspect.Run) {
	kind := kindOf(r)
	b.raw(`<tr class="not-run" data-outcome="`)
	b.raw(kind)
	b.raw(`"><td><a href="`)
	selectLink(b, page, r)
	b.raw(`">`)
	b.time(scheduledAt(r))
	b.raw(`</a></td><td>`)
	outcome(b, kind)
	b.raw(`</td><td class="none">scheduled time, not run`)
	accountedBy(b, r)
	b.raw(`</td><td></td><td></td><td></td><td></td><td></td><td>`)
	origin(b, r.Origin)
	b.raw(`</td><td></td></tr>`)
}

// accountedBy writes who accounted for a scheduled time nobody ran
// (r.By: who paused the job, whose run held the lease, who recorded it
// missed), as "; by NAME", when that is recorded: such a time has no
// holder.
func accountedBy(b *html, r inspect.Run) {
	if r.By == "" {
		return
	}
	b.raw(`; by <span class="by">`)
	b.text(r.By)
	b.raw(`</span>`)
}

// selected writes the selected run's details and the output it kept.
func selected(b *html, page jobPage) {
	r := page.Selected
	if r == nil {
		return
	}
	kind := kindOf(*r)
	if notRun(*r) {
		b.raw(`<section id="selected" class="selected"><h2>Scheduled time `)
		b.time(scheduledAt(*r))
		b.raw(` UTC <span class="outcome k-`)
		b.raw(kind)
		b.raw(`">`)
		b.raw(kind)
		b.raw(`</span></h2><p>`)
		b.text(kindMeaning(kind))
		accountedBy(b, *r)
		b.raw(`.</p></section>`)
		return
	}
	b.raw(`<section id="selected" class="selected"><h2>Run `)
	b.raw(runID(*r))
	b.raw(` <span class="outcome k-`)
	b.raw(kind)
	b.raw(`">`)
	b.raw(kind)
	b.raw(`</span></h2><dl><dt>Holder</dt><dd>`)
	b.text(r.Holder)
	b.raw(`</dd><dt>Token</dt><dd>`)
	b.int(r.FencingToken)
	b.raw(`</dd><dt>Attempt</dt><dd>`)
	b.int(int64(r.Attempt))
	b.raw(`</dd><dt>Origin</dt><dd>`)
	origin(b, r.Origin)
	b.raw(`</dd><dt>Exit status</dt><dd>`)
	exitCode(b, r.ExitCode)
	if r.Outcome == lease.OutcomeStopped && r.By != "" {
		b.raw(`</dd><dt>Stopped by</dt><dd class="stopped-by">`)
		b.text(r.By)
	}
	b.raw(`</dd><dt>Started</dt><dd>`)
	b.time(r.StartedAt)
	b.raw(`</dd><dt>Finished</dt><dd>`)
	b.time(r.FinishedAt)
	b.raw(`</dd></dl>`)
	keptOutput(b, page)
	b.raw(`</section>`)
}

// keptOutput writes the output the selected run kept, or says why it is
// not shown.
func keptOutput(b *html, page jobPage) {
	r := page.Selected
	switch {
	case page.Output != nil:
		b.raw(`<h3>Output</h3><pre class="output">`)
		b.lines(string(page.Output))
		b.raw(`</pre>`)
	case r.OutputBytes > 0 && !page.ShowOutput:
		b.raw(`<p class="none output-hidden">This run kept `)
		b.int(int64(r.OutputBytes))
		b.raw(` bytes of output. The exporter shows kept output only when started with --web.show-output; ` +
			`read it with <code>leasewrap history --job NAME --output --token `)
		b.int(r.FencingToken)
		b.raw(` --attempt `)
		b.int(int64(max(r.Attempt, 1)))
		b.raw(`</code>.</p>`)
	default:
		b.raw(`<p class="none">This run kept no output.</p>`)
	}
}

// runTable writes the runs as a table, newest first. Outcome comes
// second, and the columns from the fifth on are left out on a phone's
// width (see style.css), so that what a run's row is for stays on the
// screen; every row has a cell for each column, so that they line up.
func runTable(b *html, page jobPage) {
	b.raw(`<h2>Runs</h2><div class="scroll"><table class="runs"><thead><tr><th>Started (UTC)</th><th>Outcome</th><th>Duration</th>` +
		`<th>Exit</th><th>Holder</th><th>Slot</th><th>Token</th><th>Attempt</th>` +
		`<th>Origin</th><th>Output</th></tr></thead><tbody>`)
	for _, r := range page.Runs {
		if notRun(r) {
			notRunRow(b, page, r)
			continue
		}
		kind := kindOf(r)
		b.raw(`<tr data-outcome="`)
		b.raw(kind)
		b.raw(`"><td><a href="`)
		selectLink(b, page, r)
		b.raw(`">`)
		b.time(r.StartedAt)
		b.raw(`</a></td><td>`)
		outcome(b, kind)
		b.raw(`</td><td>`)
		b.duration(r.FinishedAt.Sub(r.StartedAt))
		b.raw(`</td><td>`)
		exitCode(b, r.ExitCode)
		b.raw(`</td><td class="holder">`)
		b.text(r.Holder)
		b.raw(`</td><td>`)
		b.int(int64(r.Slot))
		b.raw(`</td><td>`)
		b.int(r.FencingToken)
		b.raw(`</td><td>`)
		b.int(int64(r.Attempt))
		b.raw(`</td><td>`)
		origin(b, r.Origin)
		b.raw(`</td><td>`)
		if r.OutputBytes > 0 {
			b.raw(`<a href="`)
			selectLink(b, page, r)
			b.raw(`">`)
			b.int(int64(r.OutputBytes))
			b.raw(` bytes</a>`)
		}
		b.raw(`</td></tr>`)
	}
	b.raw(`</tbody></table></div>`)
}
