package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
	"github.com/redbite/leasewrap/schema"
	"github.com/redbite/leasewrap/web"
)

// tab is a page of Debian's chromium, driven over the DevTools protocol.
type tab struct {
	t       *testing.T
	ctx     context.Context
	dialogs atomic.Int64 // JavaScript dialogs that opened: a script ran that is not ours
}

// browser starts chromium headless with a fresh profile, and fails the
// test in CI when it is not installed (.ci/run installs it).
func browser(t *testing.T) *tab {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is not installed (apt-get install chromium): %v", err)
		}
		t.Skipf("chromium is not installed: %v", err)
	}
	// As root, chromium runs only without its sandbox. The flags keep it
	// from reaching out to anything but the page under test.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &tab{t: t, ctx: ctx}
	// A headless page never has the window's focus, and without it
	// focusing an element fires no focus event: emulate it.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	})); err != nil {
		t.Fatalf("cannot start chromium: %v", err)
	}
	// Any dialog is counted and dismissed: the page itself opens none.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

// do runs steps with a deadline.
func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page into out.
func eval[T any](b *tab, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds, for what follows
// a click: the navigation it starts.
func (b *tab) waitFor(js string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !eval[bool](b, js) {
		if time.Now().After(deadline) {
			b.t.Fatalf("%s never held", js)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenshotsEnv names a directory the browser tests keep their
// screenshots in, to be looked at; without it they go with the test's
// temporary directory.
const screenshotsEnv = "LEASEWRAP_WEB_SCREENSHOTS"

// screenshot saves the page as name in the test's directory and checks
// that it is not blank: a page that drew nothing has one or two colours.
func (b *tab) screenshot(name string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		dir = b.t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		b.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	colours := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			colours[[4]uint32{cr, cg, cb, ca}] = true
		}
	}
	if len(colours) < 8 {
		b.t.Errorf("screenshot %s (%dx%d) looks blank: %d colours", name, r.Dx(), r.Dy(), len(colours))
	}
	return shot
}

// drawnRun is a run box as the browser laid it out.
type drawnRun struct {
	Outcome, Holder, Fill string
	Slot                  int
	X, W                  float64
}

const drawnRunsJS = `[...document.querySelectorAll('#timeline g.lane')].map(g => ({
  holder: g.dataset.holder,
  runs: [...g.querySelectorAll('a.run')].map(a => { const r = a.querySelector('rect'); return {
    Outcome: a.dataset.outcome, Holder: a.dataset.holder, Slot: +a.dataset.slot, Fill: getComputedStyle(r).fill,
    X: +r.getAttribute('x'), W: +r.getAttribute('width')}; })}))`

type drawnLane struct {
	Holder string
	Runs   []drawnRun
}

// The colours of the outcomes, as the stylesheet sets them.
var outcomeFill = map[string]string{
	"succeeded": "rgb(46, 139, 87)", "failed": "rgb(208, 58, 47)", "timed_out": "rgb(184, 134, 11)", "lost": "rgb(123, 63, 181)",
}

// What a person sees in a real browser, over a history of real runs: a
// lane per holder with a box per run in the outcome's colour, no overlap
// drawn for runs of one lease and the overlap of two slots drawn, a run's
// facts on focus, its output once selected, and hostile names shown as
// text without running anything.
func TestBrowserShowsTheFleet(t *testing.T) {
	t.Parallel()
	b := browser(t)
	f := newFleet(t)
	f.standardHistory()
	srv := f.serve(f.pool, web.WithOutput(true))
	since := "?since=" + url.QueryEscape(f.start.UTC().Format(time.RFC3339Nano))

	// /: every job, by name, as text.
	b.do(chromedp.Navigate(srv.URL + "/"))
	names := eval[[]string](b, `[...document.querySelectorAll('tr.job td.name a')].map(a => a.textContent)`)
	want := map[string]bool{jobReport: true, jobPool: true, jobHostile: true, `evil\x1b[2J\u202etxt.exe`: true}
	if len(names) != len(want) {
		t.Errorf("/ lists %q, want the 4 jobs", names)
	}
	for _, n := range names {
		if !want[n] {
			t.Errorf("/ lists %q, not one of the jobs as text", n)
		}
	}
	if n := eval[int](b, `document.querySelectorAll('tr.job svg.bar rect').length`); n != 6+2+1+1 {
		t.Errorf("/ draws %d squares of recent runs, want 10", n)
	}
	b.screenshot("index.png")

	// The report's timeline: a's runs and b's, each in its colour.
	b.do(chromedp.Navigate(srv.URL + "/jobs/" + jobReport + since))
	lanes := eval[[]drawnLane](b, drawnRunsJS)
	wantLanes := map[string][]string{"host-a": {"succeeded", "failed", "succeeded"}, "host-b": {"succeeded", "timed_out", "lost"}}
	if len(lanes) != 2 {
		t.Fatalf("the report has %d lanes, want 2 (host-a, host-b): %+v", len(lanes), lanes)
	}
	var all []drawnRun
	for _, l := range lanes {
		var got []string
		for _, r := range l.Runs {
			got = append(got, r.Outcome)
			if r.Fill != outcomeFill[r.Outcome] || r.Holder != l.Holder {
				t.Errorf("%s's %s run is drawn %s in lane %s, want %s", r.Holder, r.Outcome, r.Fill, l.Holder, outcomeFill[r.Outcome])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantLanes[l.Holder]) {
			t.Errorf("lane %s has runs %v, want %v", l.Holder, got, wantLanes[l.Holder])
		}
		all = append(all, l.Runs...)
	}
	if overlap := overlapping(all); overlap != "" {
		t.Errorf("runs of one lease are drawn overlapping: %s", overlap)
	}
	// Focus shows a run's facts; times are given local on hover.
	b.do(chromedp.Focus(`g.lane[data-holder="host-b"] a.run[data-outcome="timed_out"]`))
	if detail := eval[string](b, `document.getElementById('detail').textContent`); !strings.Contains(detail, "timed_out, holder host-b, token ") ||
		!strings.Contains(detail, "exit 124") || !strings.Contains(detail, "your time") {
		t.Errorf("focus on the timed-out run shows %q", detail)
	}
	if title := eval[string](b, `document.querySelector('time').title`); !strings.Contains(title, "your time") {
		t.Errorf("a time's title is %q, want the local time", title)
	}
	b.screenshot("report.png")

	// Selecting the run that kept output shows it, as text.
	b.do(chromedp.Click(`table.runs td:last-child a`))
	b.waitFor(`document.querySelector('pre.output') !== null`)
	if out := eval[string](b, `document.querySelector('pre.output').textContent`); out != "line one\n<b>not bold</b>\\x1b[31m\n" {
		t.Errorf("the selected run shows output %q", out)
	}
	if n := eval[int](b, `document.querySelectorAll('pre.output *').length`); n != 0 {
		t.Errorf("the output made %d elements", n)
	}
	b.screenshot("selected.png")

	// The pool's two slots ran at once, by two holders: drawn overlapping.
	b.do(chromedp.Navigate(srv.URL + "/jobs/" + jobPool + since))
	lanes = eval[[]drawnLane](b, drawnRunsJS)
	if len(lanes) != 2 || len(lanes[0].Runs) != 1 || len(lanes[1].Runs) != 1 {
		t.Fatalf("the pool has lanes %+v, want host-c and host-d with a run each", lanes)
	}
	if overlapping(append(lanes[0].Runs, lanes[1].Runs...)) == "" {
		t.Errorf("the two slots' runs, held at once, are not drawn overlapping: %+v", lanes)
	}

	// Hostile names: shown as the text they are, nothing injected, no
	// dialog.
	for _, job := range []string{jobHostile, jobEscapes} {
		b.do(chromedp.Navigate(srv.URL + "/jobs/" + url.PathEscape(job) + since))
		if h1 := eval[string](b, `document.querySelector('h1').textContent`); h1 != strings.ReplaceAll(strings.ReplaceAll(job, "\x1b", `\x1b`), "\u202e", `\u202e`) {
			t.Errorf("job %q is titled %q", job, h1)
		}
		if n := eval[int](b, `document.querySelectorAll('img, iframe, object, embed, script:not([src$="assets/app.js"])').length`); n != 0 {
			t.Errorf("the page of %q holds %d injected elements", job, n)
		}
	}
	if lane := eval[string](b, `document.querySelector('g.lane') ? document.querySelector('g.lane').dataset.holder : ''`); lane != `\u202ehost` {
		t.Errorf("the hand-written holder's lane is %q", lane)
	}
	b.do(chromedp.Navigate(srv.URL + "/jobs/" + url.PathEscape(jobHostile) + since))
	if lane := eval[string](b, `document.querySelector('g.lane').dataset.holder`); lane != holderHostile {
		t.Errorf("the hostile holder's lane is %q", lane)
	}
	b.do(chromedp.Focus(`a.run`))
	if detail := eval[string](b, `document.getElementById('detail').textContent`); !strings.Contains(detail, holderHostile) {
		t.Errorf("focus on the hostile holder's run shows %q", detail)
	}
	b.screenshot("hostile.png")
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}

	// On a phone's width nothing but the tables' own scrolling boxes is
	// wider than the screen.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, path := range []string{"/", "/jobs/" + jobReport + since} {
		b.do(chromedp.Navigate(srv.URL + path))
		if w := eval[[]int](b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] > w[1] {
			t.Errorf("%s is %d px wide on a %d px screen", path, w[0], w[1])
		}
		if h := eval[float64](b, `document.querySelector('#timeline, table.jobs').getBoundingClientRect().height`); h <= 0 {
			t.Errorf("%s draws nothing on a phone", path)
		}
		// What happened stays on the screen without scrolling sideways.
		if over := eval[float64](b, `[...document.querySelectorAll('th')].find(th => th.textContent === 'Outcome').getBoundingClientRect().right -
  document.documentElement.clientWidth`); over > 0 {
			t.Errorf("%s: the Outcome column ends %.0f px past a phone's screen", path, over)
		}
	}
	// A job's name wraps, if at all, at a width that holds a word.
	b.do(chromedp.Navigate(srv.URL + "/"))
	if lines := eval[int](b, `[...document.querySelectorAll('td.name a')].find(a => a.textContent === '`+jobReport+`').getClientRects().length`); lines != 1 {
		t.Errorf("%s takes %d lines on a phone, want 1", jobReport, lines)
	}
	b.screenshot("phone.png")

	// Without JavaScript the timeline and the table are all there.
	b.do(chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}), chromedp.Navigate(srv.URL+"/jobs/"+jobReport+since))
	if n := eval[int](b, `document.querySelectorAll('#timeline a.run').length + document.querySelectorAll('table.runs tbody tr').length`); n != 12 {
		t.Errorf("without JavaScript the report shows %d boxes and rows, want 6 of each", n)
	}
}

// overlapping names two boxes whose drawn spans overlap, "" if none do.
func overlapping(runs []drawnRun) string {
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.X < b.X+b.W-0.01 && b.X < a.X+a.W-0.01 {
				return fmt.Sprintf("%+v and %+v", a, b)
			}
		}
	}
	return ""
}

// screenshotEnv names the file TestTimelineScreenshot writes the picture
// of a real timeline to (docs/web-timeline.png); the test is skipped
// without it.
const screenshotEnv = "LEASEWRAP_WEB_SCREENSHOT"

// TestTimelineScreenshot draws, at the default window, the timeline of a
// job run hourly for a day by three instances (a failure, a timed-out run,
// a lost one, a missed time and a manual run among them), and saves it
// where LEASEWRAP_WEB_SCREENSHOT says.
func TestTimelineScreenshot(t *testing.T) {
	out := os.Getenv(screenshotEnv)
	if out == "" {
		t.Skip(screenshotEnv + " is not set")
	}
	b := browser(t)
	f := newFleet(t)
	f.run(f.store("web-1"), jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	// A day of hourly runs, written as the wrappers record them: hour h
	// ago by one of three hosts, a few minutes long.
	if _, err := f.pool.Exec(context.Background(), `WITH runs AS (
  SELECT h, date_trunc('hour', now()) - h * interval '1 hour' AS at FROM generate_series(1, 23) h WHERE h <> 14)
INSERT INTO `+f.history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
SELECT $1, (ARRAY['web-1', 'web-2', 'worker-7f3a'])[h % 3 + 1], 1000 - h, at, at + (2 + h * 7 % 9) * interval '1 minute',
  CASE h WHEN 17 THEN 1 WHEN 11 THEN 124 WHEN 6 THEN NULL ELSE 0 END,
  CASE h WHEN 11 THEN 'timed_out' WHEN 6 THEN 'lost' ELSE 'exited' END, at FROM runs
UNION ALL SELECT $1, '', 0, date_trunc('hour', now()) - interval '14 hour', date_trunc('hour', now()) - interval '14 hour', NULL,
  'missed', date_trunc('hour', now()) - interval '14 hour'
UNION ALL SELECT $1, 'web-2', 2000, now() - interval '150 minute', now() - interval '146 minute', 0, 'exited', now() - interval '150 minute'`,
		jobReport); err != nil {
		t.Fatal(err)
	}
	claims := schema.ClaimsTable(pgx.Identifier{f.table}).Sanitize()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+claims+` (job_name, scheduled_at, outcome, holder, fencing_token)
SELECT job_name, scheduled_at, CASE WHEN fencing_token = 2000 THEN $2 ELSE 'run' END, holder, fencing_token FROM `+f.history+`
WHERE job_name = $1 AND scheduled_at IS NOT NULL AND outcome <> 'missed'`, jobReport, lease.ClaimManual); err != nil {
		t.Fatal(err)
	}
	srv := f.serve(f.pool)
	b.do(chromedp.EmulateViewport(1000, 800), chromedp.Navigate(srv.URL+"/jobs/"+jobReport))
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(`figure.timeline`))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Jobs of the layout test, beside the standard history's.
const (
	jobPaused  = "paused_job"
	jobLong    = "cache_warmup_nightly_reports"
	jobQuotes  = `a'b"c\d`
	jobBusy    = "thumbnail_resize_worker"
	jobDaily   = "daily_rollup"
	jobUnknown = "unreadable_schedule"
	// holderLong is a holder id as a Kubernetes pod's name makes it.
	holderLong = "thumbnailer-7f3a9c5d8b-x2kqz.worker-pool-eu-west"
)

// layoutHistory adds to the standard history what strains the layout and
// shows the states apart: a paused job, long names, a name with quotes
// and a backslash, a held lease with a long holder id and 30 recent runs,
// a daily job whose claims are written by hand (the latest time not run),
// and a job whose recorded schedule this version cannot read.
func (f *fleet) layoutHistory() {
	f.t.Helper()
	ctx := context.Background()
	f.run(f.store("host-a"), jobPaused, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	if _, _, err := f.store("root@ops-laptop").Pause(ctx, jobPaused, "database upgrade", time.Time{}); err != nil {
		f.t.Fatal(err)
	}
	f.run(f.store("host-a"), jobLong, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	f.run(f.store("host-b"), jobQuotes, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	busy := f.store(holderLong)
	for i := range 30 {
		end := lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}
		if i == 29 {
			end = lease.End{ExitCode: code(127), Outcome: lease.OutcomeCouldNotStart}
		}
		f.run(busy, jobBusy, end, nil)
	}
	f.take(busy, jobBusy) // held now, by the long holder id
	s, err := schedule.Parse("0 0 * * *", "UTC")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, job := range []string{jobDaily, jobUnknown} {
		if _, err := f.store("host-c").Register(ctx, job, s.Spec(), s.ZoneRules); err != nil {
			f.t.Fatal(err)
		}
	}
	// The daily job ran yesterday's time; nobody ran or recorded today's.
	claims := schema.ClaimsTable(pgx.Identifier{f.table}).Sanitize()
	if _, err := f.pool.Exec(ctx, `WITH t AS (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 day' AS at),
h AS (INSERT INTO `+f.history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
  SELECT $1, 'host-c', 5, at, at + interval '3 minute', 0, 'exited', at FROM t)
INSERT INTO `+claims+` (job_name, scheduled_at, outcome, holder, fencing_token) SELECT $1, at, $2, 'host-c', 5 FROM t`,
		jobDaily, lease.ClaimRun); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE `+pgx.Identifier{f.table}.Sanitize()+` SET schedule = 'every blue moon' WHERE job_name = $1`,
		jobUnknown); err != nil {
		f.t.Fatal(err)
	}
}

// What / and a job's page show at a laptop's width (1280 px) and a
// phone's (390 px), measured in the browser: every job's reason as text
// with a size of its own (nothing to hover), the states in colours of
// their own (the legend's, paused no alarm's), the jobs' table inside the
// screen with no name broken on a laptop, and on a phone a timeline that
// scrolls sideways at a width its labels can be read at rather than
// shrinking.
func TestBrowserLayoutAtLaptopAndPhone(t *testing.T) {
	t.Parallel()
	b := browser(t)
	f := newFleet(t)
	f.standardHistory()
	f.layoutHistory()
	srv := f.serve(f.pool)
	since := "?since=" + url.QueryEscape(f.start.Add(-48*time.Hour).UTC().Format(time.RFC3339Nano))

	// The legend's colour of each state; the states' colours apart.
	b.do(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(srv.URL+"/"))
	legend := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('.legend .health')].map(s =>
  [s.textContent, getComputedStyle(s).backgroundColor]))`)
	seen := map[string]string{}
	for _, state := range inspect.States {
		c, ok := legend[state]
		if !ok {
			t.Errorf("the legend has no entry for %s: %v", state, legend)
			continue
		}
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s are both %s", state, other, c)
		}
		seen[c] = state
	}
	for _, alarm := range []string{inspect.StateFailing, inspect.StateMissed, inspect.StateOverdue} {
		if legend[inspect.StatePaused] == legend[alarm] {
			t.Errorf("paused has the colour of %s", alarm)
		}
	}

	type row struct {
		Job, Health, Colour, Reason string
		ReasonW, ReasonH            float64
		// MidWord counts the name's line breaks between two letters or
		// digits.
		MidWord int
	}
	const rowsJS = `[...document.querySelectorAll('tr.job')].map(tr => {
  const badge = tr.querySelector('.health'), why = tr.nextElementSibling.querySelector('.reason');
  const r = why.getBoundingClientRect(), st = getComputedStyle(why);
  return {Job: tr.dataset.job, Health: badge.dataset.health, Colour: getComputedStyle(badge).backgroundColor,
    Reason: st.visibility === 'visible' && st.display !== 'none' ? why.textContent : '', ReasonW: r.width, ReasonH: r.height,
    MidWord: midWord(tr.querySelector('td.name a').firstChild)};
})`
	const midWordJS = `function midWord(text) {
  let breaks = 0, top = null;
  for (let i = 0; i < text.length; i++) {
    const r = document.createRange();
    r.setStart(text, i);
    r.setEnd(text, i + 1);
    const box = r.getBoundingClientRect();
    if (box.width === 0) continue;
    if (top !== null && box.top > top + 1 && /[\p{L}\p{N}]/u.test(text.data[i - 1]) && /[\p{L}\p{N}]/u.test(text.data[i])) breaks++;
    top = box.top;
  }
  return breaks;
}
`
	for _, width := range []int{1280, 390} {
		mobile := width < 600
		emulate := chromedp.EmulateViewport(int64(width), 900)
		if mobile {
			emulate = chromedp.EmulateViewport(int64(width), 844, chromedp.EmulateMobile)
		}
		b.do(emulate, chromedp.Navigate(srv.URL+"/"))
		rows := eval[[]row](b, midWordJS+rowsJS)
		states := map[string]string{}
		for _, r := range rows {
			states[r.Job] = r.Health
			if r.Reason == "" || r.ReasonW <= 0 || r.ReasonH <= 0 {
				t.Errorf("%d px: %s's reason is not shown: %+v", width, r.Job, r)
			}
			if r.Colour != legend[r.Health] {
				t.Errorf("%d px: %s is %s in %s, the legend's %s is %s", width, r.Job, r.Health, r.Colour, r.Health, legend[r.Health])
			}
			if !mobile && r.MidWord != 0 {
				t.Errorf("%d px: %s's name is broken mid-word %d times", width, r.Job, r.MidWord)
			}
		}
		for job, want := range map[string]string{jobPaused: inspect.StatePaused, escape.Printable(jobEscapes): inspect.StateFailing, jobLong: inspect.StateHealthy} {
			if states[job] != want {
				t.Errorf("%d px: %s is %q, want %s", width, job, states[job], want)
			}
		}
		if len(rows) != 10 {
			t.Errorf("%d px: / lists %d jobs, want 10", width, len(rows))
		}
		// The reason names the job as its name cell does: escaped once.
		quoted := slices.IndexFunc(rows, func(r row) bool { return r.Job == escape.Printable(jobQuotes) })
		if quoted < 0 {
			t.Errorf("%d px: / does not list %s", width, jobQuotes)
		} else if r := rows[quoted]; !strings.Contains(r.Reason, `a'b"c\\d`) || strings.Contains(r.Reason, `c\\\\d`) {
			t.Errorf("%d px: the reason of %s reads %q, want the name as status prints it, a'b\"c\\\\d", width, jobQuotes, r.Reason)
		}
		if w := eval[[]int](b, `(s => [s.scrollWidth, s.clientWidth])(document.querySelector('table.jobs').parentElement)`); w[0] > w[1] {
			t.Errorf("%d px: the jobs' table is %d px wide in a box of %d: it scrolls sideways", width, w[0], w[1])
		}
		b.screenshot(fmt.Sprintf("index-%d.png", width))

		for _, job := range []string{jobReport, jobPaused} {
			b.do(chromedp.Navigate(srv.URL + "/jobs/" + job + since))
			if r := eval[[]float64](b, `(r => [r.width, r.height])(document.querySelector('.verdict .reason').getBoundingClientRect())`); r[0] <= 0 || r[1] <= 0 {
				t.Errorf("%d px: %s's page shows no reason: %v", width, job, r)
			}
		}
		// The timeline: never narrower than its labels read at; on a phone
		// it scrolls in its own box, and the page does not.
		b.do(chromedp.Navigate(srv.URL + "/jobs/" + jobReport + since))
		tl := eval[map[string]float64](b, `(() => { const fig = document.querySelector('figure.timeline'), svg = document.getElementById('timeline');
  return {svg: svg.getBoundingClientRect().width, label: Math.min(...[...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect().height)),
    scroll: fig.scrollWidth, client: fig.clientWidth, end: svg.getBoundingClientRect().right - fig.getBoundingClientRect().right, auto: getComputedStyle(fig).overflowX === 'auto' ? 1 : 0,
    page: document.documentElement.scrollWidth - document.documentElement.clientWidth}; })()`)
		if tl["svg"] < 960 || tl["label"] < 10 {
			t.Errorf("%d px: the timeline is %.0f px wide, its smallest label %.1f px high; want at least 960 and 10", width, tl["svg"], tl["label"])
		}
		if mobile && (tl["auto"] != 1 || tl["scroll"] <= tl["client"]) {
			t.Errorf("%d px: the timeline does not scroll in its own box: %v", width, tl)
		}
		// Shown from its right end, where now and the newest runs are.
		if tl["end"] > 1 {
			t.Errorf("%d px: the timeline's right end, now, is %.0f px out of sight: %v", width, tl["end"], tl)
		}
		if tl["page"] > 0 {
			t.Errorf("%d px: the job's page is %.0f px wider than the screen", width, tl["page"])
		}
		b.screenshot(fmt.Sprintf("job-%d.png", width))
	}
}
