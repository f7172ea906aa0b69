// Package web renders the exporter's pages: every job at a glance (/) and
// one job's timeline with its runs (/jobs/NAME). It is read-only by
// construction: it reads through a Source, whose methods are the
// questions of an inspect.Reader (SELECTs only), and it serves GET and HEAD
// and nothing else. Pages are HTML with inline SVG, readable without
// JavaScript; the few assets are embedded in the binary and a strict
// Content-Security-Policy forbids everything else.
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
)

// Source is what the pages are read from (*inspect.Reader has it): the
// lease rows, the jobs' summaries (with their verdicts), a job's runs and the output one run
// kept. Nothing in it writes.
type Source interface {
	Status(ctx context.Context, job string) ([]inspect.JobStatus, error)
	Summaries(ctx context.Context, window time.Duration) ([]inspect.JobSummary, error)
	Summary(ctx context.Context, job string, window time.Duration) (inspect.JobSummary, error)
	History(ctx context.Context, q inspect.HistoryQuery) ([]inspect.Run, error)
	Output(ctx context.Context, q inspect.OutputQuery) (out []byte, token int64, attempt int, err error)
}

// DefaultWindow is the period a job's timeline covers without ?since=,
// and the period of the recent runs on /.
const DefaultWindow = 24 * time.Hour

// MaxRuns bounds the runs one timeline reads and draws: a window with
// more shows the newest MaxRuns and says so.
const MaxRuns = 20000

// DefaultTimeout bounds the database's answer to one page view.
const DefaultTimeout = 10 * time.Second

// contentSecurityPolicy allows the page its own embedded stylesheet and
// script and nothing else: no inline script or style, no other origin, no
// framing. Text from the database that escaped escaping still could not
// run.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// Pages serves the web pages of one lease table.
type Pages struct {
	src     Source
	log     zerolog.Logger
	timeout time.Duration
	now     func() time.Time
	// output says whether a selected run shows the output it kept. Kept
	// output may hold what a command printed of a secret, and the pages
	// may be served without authentication: it is shown only when the
	// operator chose to.
	output bool
}

// Option changes how New's pages behave.
type Option func(*Pages)

// WithOutput shows (true) or hides (false, the default) the output runs
// kept (--keep-output) on a job's page. Hidden, the page still says how
// many bytes a run kept, and never reads them from the database.
func WithOutput(show bool) Option { return func(p *Pages) { p.output = show } }

// New returns the pages of src. Handler serves them.
func New(src Source, log zerolog.Logger, opts ...Option) *Pages {
	p := &Pages{src: src, log: log, timeout: DefaultTimeout, now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Handler serves / (every job), /jobs/NAME (one job's timeline) and
// /assets/ (the embedded stylesheet and script), for GET and HEAD only.
// Links between pages are relative, so that a reverse proxy may serve them
// under a path prefix.
func (p *Pages) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", p.serveIndex)
	mux.HandleFunc("GET /jobs/{name...}", p.serveJob)
	files := http.FileServerFS(assets)
	mux.Handle("GET /assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		secure(w)
		files.ServeHTTP(w, r)
	}))
	return mux
}

// secure sets the headers every answer carries.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// writePage sends a rendered page.
func writePage(w http.ResponseWriter, status int, body []byte) {
	secure(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Bounds of ?refresh=, in seconds: each refresh is one page view, so a
// viewer costs the database at most a page's few statements every
// minRefresh.
const (
	minRefresh     = 10
	maxRefresh     = 3600
	defaultRefresh = 60 // what the page's "refresh" link asks for
)

// parseRefresh reads ?refresh=: seconds between reloads, 0 for none.
func parseRefresh(text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < minRefresh || n > maxRefresh {
		return 0, &badRequest{fmt.Errorf("invalid refresh %q: want whole seconds from %d to %d, such as %d", text, minRefresh, maxRefresh, defaultRefresh)}
	}
	return n, nil
}

// refreshControl writes the link that starts the page's refreshing, or
// says it refreshes and links to the page that does not. since is the
// page's ?since=, kept in both.
func refreshControl(b *html, since string, refresh int) {
	b.raw(`<p class="refresh">`)
	if refresh > 0 {
		b.raw(`Reloads every `)
		b.int(int64(refresh))
		b.raw(` s. <a href="?`)
	} else {
		b.raw(`<a href="?refresh=`)
		b.int(defaultRefresh)
		if since != "" {
			b.raw(`&amp;`)
		}
	}
	if since != "" {
		b.raw(`since=`)
		b.attr(url.QueryEscape(since))
	}
	if refresh > 0 {
		b.raw(`">Stop</a></p>`)
	} else {
		b.raw(`">Reload every minute</a></p>`)
	}
}

// badRequest is a page view asked for wrongly (?since=, ?refresh=, a job
// name that cannot be one).
type badRequest struct{ err error }

func (e *badRequest) Error() string { return e.err.Error() }

// answer sends a page, or what went wrong reading it: a bad request as
// 400 with its reason, anything else as fail does.
func (p *Pages) answer(w http.ResponseWriter, r *http.Request, root string, body []byte, err error) {
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		var b html
		b.head("leasewrap: bad request", root)
		b.raw(`<main><h1>Bad request</h1><p class="error">`)
		b.text(err.Error())
		b.raw(`</p></main>`)
		b.foot()
		writePage(w, http.StatusBadRequest, b.buf)
	case err != nil:
		p.fail(w, r, root, err)
	default:
		writePage(w, http.StatusOK, body)
	}
}

// fail answers a page view that could not be read: the database's error,
// escaped, and logged.
func (p *Pages) fail(w http.ResponseWriter, r *http.Request, root string, err error) {
	status := http.StatusServiceUnavailable
	if errors.Is(err, lease.ErrNoJob) {
		status = http.StatusNotFound
	} else {
		p.log.Error().Str("path", r.URL.Path).Str("error", err.Error()).Msg("cannot read the page's data")
	}
	var b html
	b.head("leasewrap: error", root)
	b.raw(`<main><h1>`)
	b.text(http.StatusText(status))
	b.raw(`</h1><p class="error">`)
	b.text(err.Error())
	b.raw(`</p><p><a href="`)
	b.attr(root)
	b.raw(`">All jobs</a></p></main>`)
	b.foot()
	writePage(w, status, b.buf)
}
