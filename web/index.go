package web

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/redbite/leasewrap/inspect"
)

// barRuns is how many of a job's newest runs /'s bar shows.
const barRuns = 30

// recentRuns bounds the runs / reads for the bars, over every job: a fleet
// busier than that in DefaultWindow shows its newest runs only.
const recentRuns = 5000

// jobRow is one line of /.
type jobRow struct {
	Job string
	leaseView
	LastRun *inspect.Run
	// Recent are the job's newest runs in the window, oldest first, the
	// scheduled times not run left out.
	Recent []inspect.Run
	// Verdict is the job's state as check, status and the exporter show
	// it; unknown when the history could not be read.
	Verdict inspect.Verdict
}

// rank orders / by the verdict: jobs that need acting on first (failing,
// missed, overdue, unknown), then stale and paused ones, then the healthy.
func (j jobRow) rank() int {
	switch j.Verdict.State {
	case inspect.StateHealthy:
		return 2
	case inspect.StateStale, inspect.StatePaused:
		return 1
	}
	return 0
}

// readJobs reads /'s rows in three statements and their catalog checks,
// however many jobs there are: the lease rows, the summaries and the
// fleet's newest runs.
func (p *Pages) readJobs(ctx context.Context) ([]jobRow, error) {
	statuses, err := p.src.Status(ctx, "")
	if err != nil {
		return nil, err
	}
	// Without a history table (yet) the jobs are listed from their
	// lease rows alone.
	summaries, err := p.src.Summaries(ctx, DefaultWindow)
	if err != nil && !errors.Is(err, inspect.ErrNoHistory) {
		return nil, err
	}
	recent, err := p.src.History(ctx, inspect.HistoryQuery{Since: p.now().Add(-DefaultWindow), Limit: recentRuns})
	if err != nil && !errors.Is(err, inspect.ErrNoHistory) {
		return nil, err
	}
	rows := make(map[string]*jobRow, len(summaries))
	var order []*jobRow
	row := func(job string) *jobRow {
		if r, ok := rows[job]; ok {
			return r
		}
		r := &jobRow{Job: job, leaseView: leaseView{Slots: 1},
			Verdict: inspect.Verdict{Job: job, State: inspect.StateUnknown, Reason: "no run history to judge it by"}}
		rows[job] = r
		order = append(order, r)
		return r
	}
	for _, s := range statuses {
		row(s.Job).add(s, p.now())
	}
	for _, s := range summaries {
		r := row(s.Job)
		r.LastRun, r.Verdict = s.LastRun, s.Verdict
		r.judged(s.Verdict)
	}
	// History is newest first: keep each job's first barRuns, then turn
	// them oldest first for the bar. A scheduled time not run is no run.
	for _, run := range recent {
		if r, ok := rows[run.Job]; ok && len(r.Recent) < barRuns && !notRun(run) {
			r.Recent = append(r.Recent, run)
		}
	}
	out := make([]jobRow, len(order))
	for i, r := range order {
		slices.Reverse(r.Recent)
		out[i] = *r
	}
	slices.SortStableFunc(out, func(a, b jobRow) int {
		return cmp.Or(cmp.Compare(a.rank(), b.rank()), cmp.Compare(a.Job, b.Job))
	})
	return out, nil
}

func (p *Pages) serveIndex(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	refresh, err := parseRefresh(r.URL.Query().Get("refresh"))
	var body []byte
	if err == nil {
		var jobs []jobRow
		if jobs, err = p.readJobs(ctx); err == nil {
			body = renderIndex(jobs, p.now(), refresh)
		}
	}
	p.answer(w, r, "", body, err)
}

// jobColumns is how many columns /'s table has: a job's reason spans
// them all.
const jobColumns = 11

// renderIndex writes /, reloading itself every refresh seconds (0: not).
func renderIndex(jobs []jobRow, now time.Time, refresh int) []byte {
	b := html{refresh: refresh}
	b.head("leasewrap: jobs", "")
	b.raw(`<header><h1>Jobs</h1><p class="sub">`)
	b.int(int64(len(jobs)))
	b.raw(` jobs, read at `)
	b.time(now)
	b.raw(` UTC. Jobs to act on first, then stale and paused ones.</p>`)
	refreshControl(&b, "", refresh)
	b.raw(`</header><main><div class="scroll"><table class="jobs"><thead><tr>` +
		`<th>Job</th><th>Health</th><th>State</th><th>Outcome</th><th>Holder</th><th>Last run</th>` +
		`<th>Duration</th><th>Origin</th><th>Exit</th><th>Next</th>` +
		`<th>Recent runs</th></tr></thead><tbody>`)
	for _, j := range jobs {
		jobRows(&b, j)
	}
	b.raw(`</tbody></table></div>`)
	if len(jobs) == 0 {
		b.raw(`<p class="none">No job in the lease table yet.</p>`)
	}
	legend(&b)
	b.raw(`</main>`)
	b.foot()
	return b.buf
}

// jobRows writes j's row of the jobs table, and the row of why it is in
// its state under it.
func jobRows(b *html, j jobRow) {
	b.raw(`<tr class="job`)
	switch j.rank() {
	case 0:
		b.raw(` failing`)
	case 1:
		b.raw(` stale`)
	}
	b.raw(`" data-job="`)
	b.attr(j.Job)
	b.raw(`"><td class="name"><a href="jobs/`)
	b.attr(jobPath(j.Job))
	b.raw(`">`)
	b.text(j.Job)
	b.raw(`</a>`)
	if j.Slots > 1 {
		b.raw(` <span class="slots">`)
		b.int(int64(j.Slots))
		b.raw(` slots</span>`)
	}
	b.raw(`</td><td>`)
	health(b, j.Verdict)
	b.raw(`</td><td>`)
	state(b, string(j.State))
	b.raw(`</td>`)
	lastRun(b, j)
	b.raw(`<td class="when">`)
	if j.Next != nil {
		b.timeWrapped(*j.Next)
	} else {
		b.raw(`—`)
	}
	b.raw(`</td><td>`)
	recentBar(b, j.Recent)
	b.raw(`</td></tr>`)
	// Why, as text under the job's row: a phone has no hover.
	b.raw(`<tr class="why"><td colspan="`)
	b.int(jobColumns)
	b.raw(`">`)
	reason(b, j.Verdict)
	b.raw(`</td></tr>`)
}

// lastRun writes a job's outcome, holders and newest run, from the
// Outcome column to the Exit column of /. The columns after Outcome are
// left out on a phone's width (see style.css).
func lastRun(b *html, j jobRow) {
	run := j.LastRun
	b.raw(`<td>`)
	if run != nil {
		outcome(b, kindOf(*run))
	} else {
		b.raw(`—`)
	}
	b.raw(`</td><td class="holder">`)
	holders(b, j.Holders)
	b.raw(`</td>`)
	if run == nil {
		b.raw(`<td colspan="4" class="none">no run in the history</td>`)
		return
	}
	b.raw(`<td class="when">`)
	b.timeWrapped(run.StartedAt)
	b.raw(`</td><td>`)
	b.duration(run.FinishedAt.Sub(run.StartedAt))
	b.raw(`</td><td>`)
	origin(b, run.Origin)
	b.raw(`</td><td>`)
	exitCode(b, run.ExitCode)
	b.raw(`</td>`)
}

// outcome writes a kind of run as its coloured word.
func outcome(b *html, kind string) {
	b.raw(`<span class="outcome k-`)
	b.raw(kind)
	b.raw(`">`)
	b.raw(kind)
	b.raw(`</span>`)
}

// recentBar draws a job's recent runs as a row of small squares, oldest
// first, coloured by outcome.
func recentBar(b *html, runs []inspect.Run) {
	if len(runs) == 0 {
		return
	}
	const size, gap = 8, 2
	b.raw(`<svg class="bar" role="img" viewBox="0 0 `)
	b.int(int64(barRuns * (size + gap)))
	b.raw(` 10" width="`)
	b.int(int64(barRuns * (size + gap)))
	b.raw(`" height="10"><title>newest runs of the last 24 h, oldest first</title>`)
	for i, r := range runs {
		kind := kindOf(r)
		b.raw(`<rect class="k-`)
		b.raw(kind)
		b.raw(`" data-outcome="`)
		b.raw(kind)
		b.raw(`" x="`)
		b.int(int64(i * (size + gap)))
		b.raw(`" y="1" width="8" height="8"><title>`)
		b.raw(kind)
		b.raw(` `)
		b.clock(r.StartedAt, ' ')
		b.raw(` UTC</title></rect>`)
	}
	b.raw(`</svg>`)
}

// state writes a lease state, a dash for none.
func state(b *html, s string) {
	if s == "" {
		b.raw(`—`)
		return
	}
	b.raw(`<span class="state s-`)
	b.attr(s)
	b.raw(`" data-state="`)
	b.attr(s)
	b.raw(`">`)
	b.text(s)
	b.raw(`</span>`)
}

// health writes a verdict's state as a badge in the state's colour
// (class h-STATE), in the data-health attribute a test or a script reads.
// The reason is written apart, as text (reason).
func health(b *html, v inspect.Verdict) {
	b.raw(`<span class="health h-`)
	b.attr(v.State)
	b.raw(`" data-health="`)
	b.attr(v.State)
	b.raw(`">`)
	b.text(v.State)
	b.raw(`</span>`)
}

// reason writes why a verdict is what it is, as the text status and check
// print: shown, not a tooltip, so that a phone shows it too.
func reason(b *html, v inspect.Verdict) {
	b.raw(`<span class="reason">`)
	b.printed(v.Reason)
	b.raw(`</span>`)
}

// origin writes how a run came to be, a dash when that cannot be told.
func origin(b *html, o string) {
	if o == "" {
		b.raw(`—`)
		return
	}
	b.raw(`<span class="origin" data-origin="`)
	b.attr(o)
	b.raw(`">`)
	b.text(o)
	b.raw(`</span>`)
}

func exitCode(b *html, code *int) {
	if code == nil {
		b.raw(`—`)
		return
	}
	b.int(int64(*code))
}
