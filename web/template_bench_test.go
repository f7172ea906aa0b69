package web

// An html/template prototype of the job page's part that grows with its
// runs (the timeline's boxes and marks, and the runs table), measured
// against the builder's: BenchmarkJobPageTemplate beside BenchmarkJobPage.
// The rest of the page (head, header, selected run, legend) is the
// builder's in both: it does not grow with the runs.

import (
	"bytes"
	"context"
	"html/template"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
	"github.com/redbite/leasewrap/timeline"
)

// runView is a run as the templates show it: its fields, and what Go
// works out for it (kind, link, geometry). Holder and Origin are
// escape.Printable's, as the builder's text writes them. The fields are
// copied, not an embedded inspect.Run: text/template looks a promoted
// field up by a slow search, a fifth of the time.
type runView struct {
	Slot, Attempt, OutputBytes int
	FencingToken               int64
	ExitCode                   *int
	StartedAt, FinishedAt      time.Time
	Kind, ID, Holder, Origin   string
	By                         string       // who accounted for a time not run
	Since                      template.URL // ?since= as url.QueryEscape writes it
	NotRun, Manual             bool
	At                         time.Time // the scheduled time a time not run stands for
	X, Y, W                    float64   // the run's box, or the time not run's mark (X)
}

type laneView struct {
	Holder, Short string
	TextY, LineY  float64
	Boxes         []*runView
}

type tickView struct {
	X     float64
	Label string
}

type timelineView struct {
	Height               float64
	Lanes                []laneView
	AxisY, TickY, LabelY float64
	Ticks                []tickView
	Marks                []*runView
}

var jobTemplate = template.Must(template.New("job").Funcs(template.FuncMap{
	"num":   func(f float64) string { var b html; b.num(f); return string(b.buf) },
	"stamp": func(t time.Time) string { var b html; b.stamp(t); return string(b.buf) },
	"clock": func(t time.Time) string { var b html; b.clock(t, ' '); return string(b.buf) },
	"dur":   func(from, to time.Time) string { var b html; b.duration(to.Sub(from)); return string(b.buf) },
}).Parse(`
{{- define "href"}}?{{if .Since}}since={{.Since}}&amp;{{end}}run={{.ID}}#selected{{end}}
{{- define "time"}}<time datetime="{{stamp .}}">{{clock .}}</time>{{end}}
{{- define "origin"}}{{if .}}<span class="origin" data-origin="{{.}}">{{.}}</span>{{else}}—{{end}}{{end}}
{{- define "exit"}}{{if .}}{{.}}{{else}}—{{end}}{{end}}

{{- define "timeline" -}}
<figure class="timeline"><svg id="timeline" role="img" aria-label="runs by holder over time" viewBox="0 0 1000.0 {{num .Height}}" preserveAspectRatio="xMinYMin meet">
{{- range .Lanes -}}
<g class="lane" data-holder="{{.Holder}}"><text class="holder" x="4" y="{{num .TextY}}">{{.Short}}<title>{{.Holder}}</title></text>
{{- /**/ -}}
<line class="lane-line" x1="150.0" x2="990.0" y1="{{num .LineY}}" y2="{{num .LineY}}"/>
{{- range .Boxes -}}
<a class="run" href="{{template "href" .}}" data-outcome="{{.Kind}}" data-holder="{{.Holder}}" data-slot="{{.Slot}}" data-token="{{.FencingToken}}" data-attempt="{{.Attempt}}" data-exit="{{with .ExitCode}}{{.}}{{end}}" data-start="{{stamp .StartedAt}}" data-end="{{stamp .FinishedAt}}">
{{- /**/ -}}
<rect class="k-{{.Kind}}" x="{{num .X}}" y="{{num .Y}}" width="{{num .W}}" height="16.0"/>
{{- if .Manual}}<circle class="manual" cx="{{num .X}}" cy="{{num .Y}}" r="4.0"/>{{end -}}
<title>{{if .Manual}}manual run, {{end}}{{.Kind}}, holder {{.Holder}}, token {{.FencingToken}}, attempt {{.Attempt}}, exit {{template "exit" .ExitCode}}, {{clock .StartedAt}} to {{clock .FinishedAt}} UTC</title></a>
{{- end -}}
</g>
{{- end -}}
<g class="axis"><line x1="150.0" x2="990.0" y1="{{num .AxisY}}" y2="{{num .AxisY}}"/>
{{- range .Ticks -}}
<line class="tick" x1="{{num .X}}" x2="{{num .X}}" y1="0" y2="{{num $.TickY}}"/><text class="tick-label" x="{{num .X}}" y="{{num $.LabelY}}">{{.Label}}</text>
{{- end -}}
{{- range .Marks -}}
<a class="mark" href="{{template "href" .}}" data-outcome="{{.Kind}}" data-start="{{stamp .At}}"><path class="k-{{.Kind}}" d="M{{num .X}} {{num $.AxisY}}l-5 -8h10z"/><title>{{.Kind}} scheduled time {{clock .At}} UTC</title></a>
{{- end -}}
</g></svg>
{{- end}}

{{- define "runs" -}}
<h2>Runs</h2><div class="scroll"><table class="runs"><thead><tr><th>Started (UTC)</th><th>Outcome</th><th>Duration</th><th>Exit</th><th>Holder</th><th>Slot</th><th>Token</th><th>Attempt</th><th>Origin</th><th>Output</th></tr></thead><tbody>
{{- range . -}}
{{- if .NotRun -}}
<tr class="not-run" data-outcome="{{.Kind}}"><td><a href="{{template "href" .}}">{{template "time" .At}}</a></td><td><span class="outcome k-{{.Kind}}">{{.Kind}}</span></td><td class="none">scheduled time, not run{{if .By}}; by <span class="by">{{.By}}</span>{{end}}</td><td></td><td></td><td></td><td></td><td></td><td>{{template "origin" .Origin}}</td><td></td></tr>
{{- else -}}
<tr data-outcome="{{.Kind}}"><td><a href="{{template "href" .}}">{{template "time" .StartedAt}}</a></td><td><span class="outcome k-{{.Kind}}">{{.Kind}}</span></td><td>{{dur .StartedAt .FinishedAt}}</td><td>{{template "exit" .ExitCode}}</td><td class="holder">{{.Holder}}</td><td>{{.Slot}}</td><td>{{.FencingToken}}</td><td>{{.Attempt}}</td><td>{{template "origin" .Origin}}</td><td>
{{- if .OutputBytes}}<a href="{{template "href" .}}">{{.OutputBytes}} bytes</a>{{end -}}
</td></tr>
{{- end -}}
{{- end -}}
</tbody></table></div>
{{- end}}`))

// runViews are page.Runs as the templates show them, in the same order.
func runViews(page jobPage) []runView {
	var since template.URL
	if page.SinceParam != "" {
		since = template.URL(url.QueryEscape(page.SinceParam))
	}
	vs := make([]runView, len(page.Runs))
	for i, r := range page.Runs {
		vs[i] = runView{Slot: r.Slot, Attempt: r.Attempt, OutputBytes: r.OutputBytes, FencingToken: r.FencingToken,
			ExitCode: r.ExitCode, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Kind: kindOf(r), ID: runID(r), Holder: escape.Printable(r.Holder),
			Origin: escape.Printable(r.Origin), By: escape.Printable(r.By), Since: since, NotRun: notRun(r),
			Manual: r.Origin == inspect.OriginManual, At: scheduledAt(r)}
	}
	return vs
}

// timelineOf is drawTimeline's geometry, for the template to write.
func timelineOf(page jobPage, vs []runView) timelineView {
	ls := timeline.Lanes(page.Runs)
	win := timeline.NewWindow(page.From, page.Now)
	x := func(t time.Time) float64 { return math.Round((tlLabel+tlPlot*win.Fraction(t))*10) / 10 }
	nextStart := nextStarts(page.Runs)
	y := float64(len(ls)) * tlLane
	tl := timelineView{Height: y + tlAxis, AxisY: y + 8, TickY: y + 12, LabelY: y + 26}
	for i, l := range ls {
		y := float64(i) * tlLane
		lv := laneView{Holder: escape.Printable(l.Holder), Short: escape.Printable(short(l.Holder, 22)),
			TextY: y + tlLane/2 + 4, LineY: y + tlLane - 0.5}
		for _, i := range l.Runs {
			r, v := page.Runs[i], &vs[i]
			x0, w := boxSpan(r, nextStart[i], x)
			v.X, v.Y, v.W = x0, y+(tlLane-tlBox)/2, w
			lv.Boxes = append(lv.Boxes, v)
		}
		tl.Lanes = append(tl.Lanes, lv)
	}
	every := timeline.Every(time.Duration(float64(win.Span())*tlChar/tlPlot), tlGap)
	layout := timeline.Layout(every)
	for _, t := range win.Ticks(every) {
		tl.Ticks = append(tl.Ticks, tickView{X: x(t), Label: t.Format(layout)})
	}
	for i := range vs {
		if vs[i].NotRun {
			vs[i].X = x(vs[i].At)
			tl.Marks = append(tl.Marks, &vs[i])
		}
	}
	return tl
}

// renderJobTemplate is renderJob with the timeline and the runs table
// written by jobTemplate: the header, the selected run, the swatches and
// the legend are the builder's.
func renderJobTemplate(page jobPage, root string) []byte {
	head := renderJob(jobPage{Job: page.Job, From: page.From, Now: page.Now, SinceParam: page.SinceParam,
		Fitted: page.Fitted, Ran: page.Ran, NotRun: page.NotRun, Truncated: page.Truncated,
		Refresh: page.Refresh, Verdict: page.Verdict, Lease: page.Lease}, root)
	head = head[:bytes.Index(head, []byte("<main>"))+len("<main>")]
	out := bytes.NewBuffer(make([]byte, 0, 4096+len(page.Runs)*900))
	out.Write(head)
	vs := runViews(page)
	if err := jobTemplate.ExecuteTemplate(out, "timeline", timelineOf(page, vs)); err != nil {
		panic(err)
	}
	b := html{buf: out.Bytes()}
	b.raw(`<figcaption>`)
	swatches(&b)
	b.raw(`</figcaption></figure><div id="detail" class="detail" aria-live="polite"></div>`)
	selected(&b, page)
	out = bytes.NewBuffer(b.buf)
	if err := jobTemplate.ExecuteTemplate(out, "runs", vs); err != nil {
		panic(err)
	}
	b = html{buf: out.Bytes()}
	legend(&b)
	b.raw(`</main>`)
	b.foot()
	return b.buf
}

// busyPages are the pages of a table whose job "busy" has BenchmarkJobPage's
// 10,000 runs.
func busyPages(tb testing.TB) *Pages {
	pool := pgtest.Pool(tb)
	table := pgtest.Table(tb, pool)
	s, err := lease.New(pool, lease.WithTable(table))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	history := schema.HistoryTable(pgx.Identifier{table}).Sanitize()
	for _, sql := range []string{
		`INSERT INTO ` + pgx.Identifier{table}.Sanitize() + ` (job_name, holder, expires_at, fencing_token) VALUES ('busy', 'host-a', now(), 10000)`,
		`INSERT INTO ` + history + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
SELECT 'busy', CASE WHEN g % 3 = 0 THEN 'host-b' ELSE 'host-a' END, g,
  now() - g * interval '8 second', now() - g * interval '8 second' + interval '5 second',
  CASE WHEN g % 17 = 0 THEN 1 ELSE 0 END, CASE WHEN g % 101 = 0 THEN 'lost' ELSE 'exited' END
FROM generate_series(1, 10000) g`,
		`ANALYZE ` + history,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			tb.Fatal(err)
		}
	}
	r, err := inspect.Open(pool, table)
	if err != nil {
		tb.Fatal(err)
	}
	return New(r, zerolog.Nop())
}

// BenchmarkJobPageTemplate is BenchmarkJobPage, statements included, with
// the page written by renderJobTemplate: serveJob with the other renderer.
func BenchmarkJobPageTemplate(b *testing.B) {
	p := busyPages(b)
	const root = "../"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
		defer cancel()
		page, err := p.readJob(ctx, "busy", r.URL.Query())
		var body []byte
		if err == nil {
			body = renderJobTemplate(page, root)
		}
		p.answer(w, r, root, body, err)
	})
	req := httptest.NewRequest("GET", "/jobs/busy", nil)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkRenderJobPage writes the same page, read once: the renderers
// alone, without the statements.
func BenchmarkRenderJobPage(b *testing.B) {
	p := busyPages(b)
	page, err := p.readJob(context.Background(), "busy", url.Values{})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range []struct {
		name   string
		render func(jobPage, string) []byte
	}{{"builder", renderJob}, {"template", renderJobTemplate}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.render(page, "../")
			}
		})
	}
}

// TestJobPageTemplateWritesTheBuildersPage checks that the benchmarks
// compare the same page: renderJobTemplate's bytes are renderJob's, for
// the benchmarks' 10,000 runs and for a page with every kind of row.
func TestJobPageTemplateWritesTheBuildersPage(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(-d) }
	ptr := func(t time.Time) *time.Time { return &t }
	var runs []inspect.Run
	outcomes := []string{lease.OutcomeExited, lease.OutcomeExited, lease.OutcomeSignalled, lease.OutcomeLost, lease.OutcomeTimedOut,
		lease.OutcomeStopped, lease.OutcomeCouldNotStart, inspect.OutcomeRunning, lease.OutcomeMissed, lease.OutcomeSkipped,
		lease.OutcomePaused, "new-outcome"}
	holders := []string{"host-a", `"><script>alert(3)</script>`, "evil\x1b[2J\u202ehost", "a-very-long-holder-name-of-a-kubernetes-pod-7d9f8"}
	origins := []string{inspect.OriginSchedule, inspect.OriginManual, inspect.OriginPlain, "", "<b>"}
	for i := range 60 {
		r := inspect.Run{Job: "j", Slot: 1 + i%2, Holder: holders[i%len(holders)], FencingToken: int64(100 + i), Attempt: 1 + i%3,
			StartedAt: at(time.Duration(i) * 7 * time.Minute), Outcome: outcomes[i%len(outcomes)],
			Origin: origins[i%len(origins)], OutputBytes: i % 4 * 100}
		if notRun(r) {
			// As the history reads it: a time not run has no holder.
			r.By, r.Holder = r.Holder, ""
		}
		r.FinishedAt = r.StartedAt.Add([]time.Duration{0, 400 * time.Millisecond, 12 * time.Second, 3 * time.Minute, 2 * time.Hour}[i%5])
		if i%6 != 5 {
			code := i % 3
			r.ExitCode = &code
		}
		if lease.NotRun(r.Outcome) && i%2 == 0 {
			r.ScheduledAt = ptr(r.StartedAt.Add(-time.Second))
		}
		runs = append(runs, r)
	}
	pages := map[string]jobPage{}
	for _, since := range []string{"", "24h", "2026-03-01T08:00:00+01:00"} {
		page := jobPage{Job: `<job & "name">`, From: at(DefaultWindow), Now: now, SinceParam: since, Verdict: inspect.Verdict{State: inspect.StateUnknown, Reason: "r"}}
		page.place(append([]inspect.Run(nil), runs...))
		page.Selected = &page.Runs[3]
		pages["kinds, since="+since] = page
	}
	p := busyPages(t)
	busy, err := p.readJob(context.Background(), "busy", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	if len(busy.Runs) != 10000 {
		t.Fatalf("%d runs read, want 10000", len(busy.Runs))
	}
	pages["busy"] = busy
	for name, page := range pages {
		want, got := renderJob(page, "../"), renderJobTemplate(page, "../")
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: the template's page differs at byte %d:\n got …%s\nwant …%s", name, i,
				got[max(i-200, 0):min(i+200, len(got))], want[max(i-200, 0):min(i+200, len(want))])
		}
	}
}
