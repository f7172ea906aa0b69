package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
	"github.com/redbite/leasewrap/schema"
	"github.com/redbite/leasewrap/web"
)

// shown is name as a page shows it: its controls spelled out, then
// HTML-escaped.
func shown(name string) string { return html.EscapeString(escape.Printable(name)) }

// / and /jobs/NAME name every job, escaped, under a policy that runs no
// script but the page's own; a job that does not exist is a 404 and a bad
// window a 400.
func TestPagesNameEveryJobAsText(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.standardHistory()
	srv := f.serve(f.pool)

	status, body, h := lwtest.Get(t, srv.URL, "/")
	if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") ||
		!strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("/ answered %d, %v", status, h)
	}
	for _, job := range []string{jobReport, jobPool, jobHostile, jobEscapes} {
		if !strings.Contains(body, ">"+shown(job)+"</a>") {
			t.Errorf("/ does not name %q as text", job)
		}
	}
	for _, raw := range []string{jobHostile, jobEscapes, "\x1b", "\u202e", "<img", "alert(3)</script>"} {
		if strings.Contains(body, raw) {
			t.Errorf("/ holds %q raw", raw)
		}
	}
	if n := strings.Count(body, "<script"); n != 1 {
		t.Errorf("/ has %d script elements, want the page's own only", n)
	}
	// Failing first: the report's newest run succeeded, the hand-written
	// job's failed.
	if strings.Index(body, shown(jobEscapes)) > strings.Index(body, shown(jobReport)) {
		t.Error("the failing job is not listed before the others")
	}

	for _, job := range []string{jobReport, jobPool, jobHostile, jobEscapes} {
		status, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+url.PathEscape(job))
		if status != 200 || !strings.Contains(body, `<h1 class="job-name">`+shown(job)+"</h1>") {
			t.Errorf("/jobs/%s answered %d without its name as text", job, status)
		}
		if strings.Count(body, "<script") != 1 || strings.Contains(body, "\x1b") || strings.Contains(body, "\u202e") {
			t.Errorf("/jobs/%s holds a script or a control character", job)
		}
	}
	if status, _, _ := lwtest.Get(t, srv.URL, "/jobs/no_such_job"); status != 404 {
		t.Errorf("an unknown job answered %d, want 404", status)
	}
	if status, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport+"?since=yesterday"); status != 400 || !strings.Contains(body, "24h") {
		t.Errorf("a bad ?since= answered %d: %s", status, body)
	}
	resp, err := http.Post(srv.URL+"/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / answered %d, want 405", resp.StatusCode)
	}
	if status, body, h := lwtest.Get(t, srv.URL, "/assets/app.js"); status != 200 || !strings.Contains(body, "textContent") ||
		h.Get("Content-Security-Policy") == "" {
		t.Errorf("/assets/app.js answered %d", status)
	}
}

// outputLink is the path that selects the run of body (a job page) that
// kept output.
func outputLink(t *testing.T, body string) string {
	t.Helper()
	i := strings.Index(body, `bytes</a>`)
	if i < 0 {
		t.Fatal("no run of the report links to its output")
	}
	href := body[strings.LastIndex(body[:i], `href="`)+len(`href="`):]
	href = html.UnescapeString(href[:strings.IndexByte(href, '"')])
	return "/jobs/" + jobReport + href[:strings.IndexByte(href, '#')]
}

// With WithOutput(true) the run a link selects is shown with the output
// it kept, its line breaks kept and its markup and escape sequences as
// text.
func TestSelectedRunShowsItsOutput(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.standardHistory()
	srv := f.serve(f.pool, web.WithOutput(true))
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport)
	path := outputLink(t, body)
	status, body, _ := lwtest.Get(t, srv.URL, path)
	want := `<pre class="output">line one` + "\n" + `&lt;b&gt;not bold&lt;/b&gt;\x1b[31m` + "\n</pre>"
	if status != 200 || !strings.Contains(body, want) {
		t.Errorf("the selected run (%s) does not show its output as %q", path, want)
	}
}

// By default kept output, which may hold a secret a command printed, is
// not shown, nor even read from the database: the page says how many bytes
// the run kept and how to read them.
func TestKeptOutputIsHiddenByDefault(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.standardHistory()
	db := &countingDB{DB: f.pool}
	shown, hidden := f.serve(f.pool, web.WithOutput(true)), f.serve(db)
	_, body, _ := lwtest.Get(t, hidden.URL, "/jobs/"+jobReport)
	path := outputLink(t, body)
	status, body, _ := lwtest.Get(t, hidden.URL, path)
	if status != 200 || strings.Contains(body, "line one") || strings.Contains(body, `<pre class="output">`) {
		t.Errorf("%s shows the kept output without WithOutput(true): %s", path, body)
	}
	if want := fmt.Sprintf(`This run kept %d bytes of output.`, len(reportOutput)); !strings.Contains(body, want) ||
		!strings.Contains(body, "--web.show-output") {
		t.Errorf("%s does not say %q and how to show it: %s", path, want, body)
	}
	// One statement fewer than the page that shows the output: the
	// output's.
	before := db.n.Load()
	lwtest.Get(t, hidden.URL, path)
	withoutOutput := db.n.Load() - before
	before = db.n.Load()
	lwtest.Get(t, hidden.URL, "/jobs/"+jobReport)
	if plain := db.n.Load() - before; withoutOutput != plain {
		t.Errorf("selecting a run that kept output cost %d statements, the page without a selection %d: want the output unread", withoutOutput, plain)
	}
	if _, body, _ := lwtest.Get(t, shown.URL, path); !strings.Contains(body, `<pre class="output">`) {
		t.Errorf("%s with WithOutput(true) does not show the output", path)
	}
}

// countingDB counts the statements a Reader sends.
type countingDB struct {
	inspect.DB
	n atomic.Int64
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

// A page view costs the same few statements however many jobs and runs
// there are: a job page with a selected run reads the lease rows, the runs
// and their claims, the job's verdict and the run's output, each with its
// catalog checks.
func TestPageViewsCostABoundedNumberOfStatements(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.standardHistory()
	db := &countingDB{DB: f.pool}
	srv := f.serve(db, web.WithOutput(true))
	cost := func(path string) int64 {
		before := db.n.Load()
		if status, _, _ := lwtest.Get(t, srv.URL, path); status != 200 {
			t.Fatalf("%s answered %d", path, status)
		}
		return db.n.Load() - before
	}
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport)
	selected := outputLink(t, body)
	paths := []string{"/", "/jobs/" + jobReport, selected}
	var small []int64
	for _, p := range paths {
		small = append(small, cost(p))
	}
	s := f.store("host-e")
	for i := range 20 {
		job := "more_" + string(rune('a'+i))
		for range 3 {
			f.run(s, job, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
			f.run(s, jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
		}
	}
	for i, p := range paths {
		if n := cost(p); n != small[i] || n > 12 {
			t.Errorf("%s cost %d statements with 4 jobs, %d with 24 and more runs; want the same few", p, small[i], n)
		}
	}
}

// Without a history table the jobs are still listed, from their lease
// rows, and a job's page shows no runs rather than an error.
func TestPagesWithoutHistory(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	if _, err := f.pool.Exec(context.Background(), `DROP TABLE `+f.history); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	if status, body, _ := lwtest.Get(t, srv.URL, "/"); status != 200 || !strings.Contains(body, ">"+jobReport+"</a>") {
		t.Errorf("/ without history answered %d: %s", status, body)
	}
	if status, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport); status != 200 || strings.Contains(body, `class="run"`) {
		t.Errorf("/jobs/%s without history answered %d: %s", jobReport, status, body)
	}
}

// Scheduled times nobody ran (missed) or passed over (skipped) are marks
// on the time axis, not boxes in a lane.
func TestMissedAndSkippedTimesAreMarks(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	// As the schedule records them: started and finished at the time.
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+f.history+`
  (job_name, holder, fencing_token, started_at, finished_at, outcome, scheduled_at)
VALUES ($1, '', 0, now() - interval '2 hour', now() - interval '2 hour', $2, now() - interval '2 hour'),
  ($1, '', 0, now() - interval '1 hour', now() - interval '1 hour', $3, now() - interval '1 hour')`,
		jobReport, lease.OutcomeMissed, lease.OutcomeSkipped); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport)
	for _, want := range []string{`<a class="mark" href="`, `data-outcome="missed" data-start="`, `data-outcome="skipped" data-start="`} {
		if !strings.Contains(body, want) {
			t.Errorf("the timeline has no %s", want)
		}
	}
	if n, lanes := strings.Count(body, `<a class="run"`), strings.Count(body, `<g class="lane"`); n != 1 || lanes != 1 {
		t.Errorf("the timeline draws %d boxes in %d lanes, want the one run in host-a's lane", n, lanes)
	}
	// Nor are they runs in the counts or the table: a row of their own
	// kind, with no holder, token or attempt.
	if !strings.Contains(body, `>1 run and 2 scheduled times not run from `) {
		t.Errorf("the page does not count 1 run and 2 times not run: %s", body)
	}
	for _, kind := range []string{"missed", "skipped"} {
		if !strings.Contains(body, `<tr class="not-run" data-outcome="`+kind+`">`) {
			t.Errorf("the table has no not-run row for the %s time", kind)
		}
	}
	if n := strings.Count(body, "scheduled time, not run"); n != 2 {
		t.Errorf("the table shows %d times as not run, want 2", n)
	}
}

// The table lists runs by their start, newest first, though the history
// gives them by their finish: a long run that finished last is listed
// after a short one that started later.
func TestRunsAreListedByStart(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+f.history+`
  (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
VALUES ($1, 'host-long', 7, now() - interval '3 hour', now() - interval '2 minute', 0, 'exited', NULL),
  ($1, 'host-short', 8, now() - interval '2 hour', now() - interval '119 minute', 0, 'exited', NULL),
  ($1, '', 0, now() - interval '90 minute', now() - interval '90 minute', NULL, $2, now() - interval '90 minute')`,
		jobReport, lease.OutcomeMissed); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport)
	tbody := body[strings.Index(body, "<tbody>"):]
	var starts []string
	for _, row := range strings.Split(tbody, "<tr")[1:] {
		at := row[strings.Index(row, `<time datetime="`)+len(`<time datetime="`):]
		starts = append(starts, at[:strings.IndexByte(at, '"')])
	}
	if len(starts) != 4 || !slices.IsSortedFunc(starts, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Errorf("the table lists starts %v, want 4, newest first", starts)
	}
}

// The pages say a job's lease state in the words of leasewrap status
// (released, expired, held, kept; no other), and the legend says what
// each means.
func TestLeaseStatesInStatusWords(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	held := f.take(f.store("host-b"), "held_job")
	defer held.Finish(context.Background(), lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited})
	kept := f.take(f.store("host-c", lease.WithHoldFor(time.Hour)), "kept_job")
	if err := kept.Finish(context.Background(), lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/")
	for job, state := range map[string]string{jobReport: "released", "held_job": "held", "kept_job": "kept"} {
		row := body[strings.Index(body, `data-job="`+job+`"`):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, `data-state="`+state+`"`) {
			t.Errorf("/ does not show %s as %s: %s", job, state, row)
		}
	}
	_, page, _ := lwtest.Get(t, srv.URL, "/jobs/kept_job")
	for _, b := range []string{body, page} {
		if strings.Contains(b, ">free<") || strings.Contains(b, "s-free") {
			t.Error("a page says free, a word status does not use")
		}
		for _, s := range []string{"held", "releasing", "kept", "released", "expired"} {
			if !strings.Contains(b, `<dt><span class="state s-`+s+`">`+s+`</span></dt><dd>`) {
				t.Errorf("the legend does not explain %s", s)
			}
		}
		if !strings.Contains(b, "--hold-for keeps the lease until it expires") {
			t.Error("the legend does not say what kept means")
		}
	}
	if !strings.Contains(page, `data-state="kept"`) {
		t.Error("the job page does not show the kept lease")
	}
}

// A job with a schedule shows its next scheduled time, from the schedule
// recorded with it; one without shows none.
func TestIndexShowsTheNextScheduledTime(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	s, err := schedule.Parse("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store("host-b").Register(context.Background(), "scheduled_job", s.Spec(), s.ZoneRules); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/")
	next := s.Next(time.Now()).UTC().Format("2006-01-02T15:04:05.000Z")
	if n := strings.Count(body, `<time datetime="`+next+`"`); n != 1 {
		t.Errorf("/ shows the next time %s %d times, want once (for scheduled_job only): %s", next, n, body)
	}
}

// A job's page shows its lease now (state and holders), its schedule and
// its next scheduled time, and marks a manual run (leasewrap trigger) in
// the timeline.
func TestJobPageShowsTheJobNowAndManualRuns(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	s, err := schedule.Parse("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store("host-b").Register(context.Background(), "scheduled_job", s.Spec(), s.ZoneRules); err != nil {
		t.Fatal(err)
	}
	held := f.take(f.store("host-b"), "scheduled_job")
	defer held.Finish(context.Background(), lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited})
	claims := schema.ClaimsTable(pgx.Identifier{f.table}).Sanitize()
	if _, err := f.pool.Exec(context.Background(), `WITH t AS (SELECT date_trunc('second', now()) - interval '1 hour' AS at),
h AS (INSERT INTO `+f.history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
  SELECT 'scheduled_job', 'host-m', 9, at, at + interval '1 second', 0, 'exited', at FROM t)
INSERT INTO `+claims+` (job_name, scheduled_at, outcome, holder, fencing_token) SELECT 'scheduled_job', at, $1, 'host-m', 9 FROM t`,
		lease.ClaimManual); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/scheduled_job")
	next := s.Next(time.Now()).UTC().Format("2006-01-02T15:04:05.000Z")
	for _, want := range []string{`<dt>Lease</dt><dd><span class="state s-held" data-state="held">held</span>`,
		`<dt>Holders</dt><dd class="holder">host-b</dd>`, `<dt>Schedule</dt><dd><code>` + html.EscapeString(s.Spec()),
		`<dt>Next</dt><dd><time datetime="` + next + `"`, `<circle class="manual"`, `<title>manual run, succeeded`} {
		if !strings.Contains(body, want) {
			t.Errorf("the job page lacks %s", want)
		}
	}
	if n := strings.Count(body, `<circle class="manual"`); n != 1 {
		t.Errorf("%d manual marks, want 1 (the manual run's)", n)
	}
	if strings.Contains(body, "<dt>Paused</dt>") {
		t.Error("a job that runs is shown paused")
	}
	if strings.Contains(body, "<dt>Queue</dt>") {
		t.Error("a job without standbys is shown with a queue")
	}
	if _, _, err := f.store("host-b").Pause(context.Background(), "scheduled_job", "disk <full>", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, body, _ := lwtest.Get(t, srv.URL, "/jobs/scheduled_job"); !strings.Contains(body, `<dt>Paused</dt><dd class="paused">by `) ||
		!strings.Contains(body, ": disk &lt;full&gt;</dd>") {
		t.Errorf("the paused job's page does not say by whom, until when and why: %s", body)
	}
}

// A job's page shows its queue in the order a release hands the lease on
// (pinned, then by priority, then first come), each standby with its
// priority, pin, how it hears a release and since when it waits, its
// holder id as text; a standby that stopped looking is not shown.
func TestJobPageShowsTheQueueInOrder(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	held := f.take(f.store("host-a"), "queued_job")
	defer held.Release(context.Background(), nil)
	// A listening standby's entry lives as long as its backend: this
	// connection's, held until the test ends.
	conn, err := f.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	since := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	pgtest.MixedQueue(t, conn, f.table, "queued_job", holderHostile, since)
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/queued_job")
	want := `<dt>Queue</dt><dd><ol class="queue">` +
		`<li><span class="holder">b</span>: priority 0, pinned, polling, waiting since <time datetime="2026-03-01T02:00:05.000Z">2026-03-01 02:00:05</time> UTC</li>` +
		`<li><span class="holder">` + shown(holderHostile) + `</span>: priority 1, listening, waiting since <time datetime="2026-03-01T02:00:04.000Z">2026-03-01 02:00:04</time> UTC</li>` +
		`<li><span class="holder">d</span>: priority 0, polling, waiting since <time datetime="2026-03-01T02:00:01.000Z">2026-03-01 02:00:01</time> UTC</li>` +
		`<li><span class="holder">e</span>: priority 0, polling, waiting since <time datetime="2026-03-01T02:00:02.000Z">2026-03-01 02:00:02</time> UTC</li>` +
		`</ol></dd>`
	if !strings.Contains(body, want) {
		t.Errorf("the job page does not show the queue b, the hostile holder, d, e in order: %s", body)
	}
	if strings.Contains(body, "dead-standby") || strings.Contains(body, holderHostile) {
		t.Error("the job page shows a dead standby, or a holder id raw")
	}
}

// At the default window a job whose runs took milliseconds, seconds ago,
// is drawn over the period of its runs, not a day in which they would be
// thinner than a pixel.
func TestShortRunsAreVisibleAtTheDefaultWindow(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.standardHistory()
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport)
	if !strings.Contains(body, "narrowed to its runs") {
		t.Error("the default window is not narrowed to the runs")
	}
	var widths []float64
	for _, box := range strings.Split(body, `<a class="run"`)[1:] {
		w := box[strings.Index(box, `width="`)+len(`width="`):]
		var width float64
		if _, err := fmt.Sscan(w[:strings.IndexByte(w, '"')], &width); err != nil {
			t.Fatal(err)
		}
		widths = append(widths, width)
	}
	if len(widths) != 6 || slices.Min(widths) < 0.5 {
		t.Errorf("runs drawn %v wide (of 1000), want 6, none under 0.5", widths)
	}
	// A window asked for is kept as asked.
	if _, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport+"?since=24h"); strings.Contains(body, "narrowed") {
		t.Error("?since=24h was narrowed")
	}
}

// A short run is drawn at its least width however close a scheduled time
// not run (a mark on the axis, not a run) follows it.
func TestAMarkDoesNotNarrowARun(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+f.history+`
  (job_name, holder, slot, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
VALUES ($1, 'host-a', 1, 5, now() - interval '1 hour', now() - interval '1 hour' + interval '1 second', 0, 'exited', NULL),
  ($1, 'host-a', 1, 0, now() - interval '1 hour' + interval '2 second', now() - interval '1 hour' + interval '2 second', NULL, $2, now() - interval '1 hour' + interval '2 second')`,
		jobReport, lease.OutcomeSkipped); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	_, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport+"?since=24h")
	box := body[strings.Index(body, `<a class="run"`):]
	box = box[strings.Index(box, `width="`)+len(`width="`):]
	if w := box[:strings.IndexByte(box, '"')]; w != "3.0" {
		t.Errorf("a run of a second in a day is drawn %s wide, want 3.0", w)
	}
}

// ?refresh= makes a page reload itself, without script (a meta refresh
// the CSP need not allow), at most every 10 s; both pages link to it and
// back.
func TestPagesReloadThemselvesWhenAsked(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	srv := f.serve(f.pool)
	for _, path := range []string{"/", "/jobs/" + jobReport} {
		_, plain, _ := lwtest.Get(t, srv.URL, path)
		if strings.Contains(plain, `http-equiv="refresh"`) || !strings.Contains(plain, `<a href="?refresh=60">Reload every minute</a>`) {
			t.Errorf("%s reloads itself unasked, or has no link to: %s", path, plain)
		}
		status, body, h := lwtest.Get(t, srv.URL, path+"?refresh=30")
		if status != 200 || !strings.Contains(body, `<meta http-equiv="refresh" content="30">`) || !strings.Contains(body, `Reloads every 30 s. <a href="?">Stop</a>`) {
			t.Errorf("%s?refresh=30 answered %d without reloading every 30 s: %s", path, status, body)
		}
		if csp := h.Get("Content-Security-Policy"); csp != "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'" {
			t.Errorf("%s?refresh=30 has the policy %q", path, csp)
		}
		for _, bad := range []string{"5", "3601", "soon"} {
			if status, body, _ := lwtest.Get(t, srv.URL, path+"?refresh="+bad); status != 400 || !strings.Contains(body, "from 10 to 3600") {
				t.Errorf("%s?refresh=%s answered %d: %s", path, bad, status, body)
			}
		}
	}
	if _, body, _ := lwtest.Get(t, srv.URL, "/jobs/"+jobReport+"?since=6h&refresh=30"); !strings.Contains(body, `<a href="?since=6h">Stop</a>`) {
		t.Error("stopping the reloads forgets the window")
	}
}

// A name with quotes and a backslash, and one with controls, read the
// same everywhere a page names them: in the name cell, the title and
// the reason, escaped once as status prints them (a'b"c\\d), the reason
// as the text the judgement gave (check and status print it), shown as
// text rather than as a tooltip.
func TestNamesReadTheSameInTheirReason(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	const quoted = `a'b"c\d`
	// Failed, never succeeded: the reasons say no age, which would move
	// between the reads.
	f.run(f.store("host-a"), quoted, lease.End{ExitCode: code(1), Outcome: lease.OutcomeExited}, nil)
	f.standardHistory()
	srv := f.serve(f.pool)
	r := f.reader(f.pool)
	_, index, _ := lwtest.Get(t, srv.URL, "/")
	for _, job := range []string{quoted, jobEscapes} {
		s, err := r.Summary(context.Background(), job, web.DefaultWindow)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.Verdict.Reason, escape.Printable(job)) {
			t.Fatalf("the reason of %q is %q: it does not name the job", job, s.Verdict.Reason)
		}
		reason := `<span class="reason">` + html.EscapeString(s.Verdict.Reason) + `</span>`
		_, page, _ := lwtest.Get(t, srv.URL, "/jobs/"+url.PathEscape(job))
		for where, want := range map[string][]string{
			"/":        {">" + shown(job) + "</a>", reason},
			"its page": {`<h1 class="job-name">` + shown(job) + "</h1>", reason},
		} {
			body := map[string]string{"/": index, "its page": page}[where]
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("%s does not show %s", where, w)
				}
			}
			// Escaped twice, the backslash would be four.
			if twice := html.EscapeString(escape.Printable(escape.Printable(job))); strings.Contains(body, twice) {
				t.Errorf("%s shows %q escaped twice: %s", where, job, twice)
			}
			if strings.Contains(body, `title="`+html.EscapeString(s.Verdict.Reason)) {
				t.Errorf("%s still gives the reason of %q as a tooltip", where, job)
			}
		}
	}
}

// The legend says what every state of inspect.States means, each in a
// colour the stylesheet gives it.
func TestEveryHealthHasAMeaningAndAColour(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.run(f.store("host-a"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	srv := f.serve(f.pool)
	_, css, _ := lwtest.Get(t, srv.URL, "/assets/style.css")
	for _, path := range []string{"/", "/jobs/" + jobReport} {
		_, body, _ := lwtest.Get(t, srv.URL, path)
		for _, state := range inspect.States {
			entry := `<dt><span class="health h-` + state + `">` + state + `</span></dt><dd>`
			i := strings.Index(body, entry)
			if i < 0 || strings.HasPrefix(body[i+len(entry):], "</dd>") {
				t.Errorf("%s: the legend does not say what %s means", path, state)
			}
		}
	}
	for _, state := range inspect.States {
		if !strings.Contains(css, ".h-"+state+" { background: ") {
			t.Errorf("the stylesheet gives %s no colour", state)
		}
	}
}
