package monitor

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
)

// RunsWindow is how far back leasewrap_job_runs counts finished runs.
const RunsWindow = 24 * time.Hour

// DefaultScrapeTimeout bounds the database's answer to one scrape.
const DefaultScrapeTimeout = 5 * time.Second

// Summarizer is what an Exporter reads the jobs from (*inspect.Reader has it).
type Summarizer interface {
	Summaries(ctx context.Context, window time.Duration) ([]inspect.JobSummary, error)
}

// Exporter is a prometheus.Collector that reads every job's lease and
// history when it is scraped, for one exporter process serving the whole
// fleet. A scrape the database does not answer in time yields
// leasewrap_exporter_up 0 and no job series, and is logged.
type Exporter struct {
	src     Summarizer
	timeout time.Duration
	log     zerolog.Logger
	ctx     context.Context // cancelled on shutdown: a scrape in flight gives up

	mu      sync.Mutex
	lastErr string // the last failed scrape's error; "" after a success
	// redact is applied to the failures /readyz shows (nil: none).
	redact func(error) error

	up, duration, lastSuccess, lastRun, lastExit, runs, held, slotsHeld, slots, holder *prometheus.Desc
	nextScheduled, state, lastOrigin, paused                                           *prometheus.Desc
}

var _ prometheus.Collector = (*Exporter)(nil)

// NewExporter returns an Exporter reading from src, each scrape bounded by
// timeout and by ctx.
func NewExporter(ctx context.Context, src Summarizer, timeout time.Duration, log zerolog.Logger) *Exporter {
	lease := []string{"lease"}
	return &Exporter{src: src, timeout: timeout, log: log, ctx: ctx,
		up: prometheus.NewDesc("leasewrap_exporter_up",
			"1 if the last scrape read the lease and history tables, 0 if the database did not answer (see the exporter's log).", nil, nil),
		duration: prometheus.NewDesc("leasewrap_exporter_scrape_duration_seconds",
			"How long the last scrape's database read took.", nil, nil),
		lastSuccess: prometheus.NewDesc("leasewrap_job_last_success_timestamp_seconds",
			"When the job's newest run that exited 0 finished, in Unix seconds; absent if none in the history.", lease, nil),
		lastRun: prometheus.NewDesc("leasewrap_job_last_run_timestamp_seconds",
			"When the job's newest run finished, in Unix seconds, whatever its outcome; absent if none in the history.", lease, nil),
		lastExit: prometheus.NewDesc("leasewrap_job_last_exit_code",
			"Exit status of the job's newest finished run (128+N for signal N); -1 if there is none or it has none (lost with its holder).", lease, nil),
		runs: prometheus.NewDesc("leasewrap_job_runs",
			"Runs of the job that finished in the last 24 hours, by outcome (exited, signalled, lost, stopped, could_not_start, timed_out; "+
				"for a job with a schedule also missed, skipped and paused, the scheduled times nobody ran).",
			[]string{"lease", "outcome"}, nil),
		nextScheduled: prometheus.NewDesc("leasewrap_job_next_scheduled_timestamp_seconds",
			"The job's next scheduled time, in Unix seconds, by the schedule recorded with it (--schedule) and the database clock; absent for a job without one.", lease, nil),
		state: prometheus.NewDesc("leasewrap_job_state",
			"1 for the job's state, 0 for the others: healthy, paused (leasewrap pause), failing, stale, missed, "+
				"overdue (a due time no instance ran or recorded), unknown; the same judgement as leasewrap check, status, history and the web page.", []string{"lease", "state"}, nil),
		lastOrigin: prometheus.NewDesc("leasewrap_job_last_run_origin",
			"1 for how the job's newest finished run came to be: schedule, catch-up, manual (leasewrap trigger) or plain; "+
				"absent when there is none or it cannot be told.", []string{"lease", "origin"}, nil),
		paused: prometheus.NewDesc("leasewrap_job_paused_info",
			"1 while an operator has the job paused (leasewrap pause), with who paused it and why; absent otherwise.",
			[]string{"lease", "paused_by", "reason"}, nil),
		held: prometheus.NewDesc("leasewrap_job_lease_held",
			"1 while any slot of the job's lease is live (no other instance can take it), else 0.", lease, nil),
		slotsHeld: prometheus.NewDesc("leasewrap_job_slots_held",
			"How many of the job's slots are live (0 or 1 for a job with one slot).", lease, nil),
		slots: prometheus.NewDesc("leasewrap_job_slots",
			"How many slots the job's lease rows record (--slots; 1 for a plain lease).", lease, nil),
		holder: prometheus.NewDesc("leasewrap_job_holder_info",
			"1 for each holder of a live slot of the job.", []string{"lease", "holder"}, nil),
	}
}

// Describe sends every series' description.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{e.up, e.duration, e.lastSuccess, e.lastRun, e.lastExit, e.runs, e.held, e.slotsHeld, e.slots, e.holder,
		e.nextScheduled, e.state, e.lastOrigin, e.paused} {
		ch <- d
	}
}

// Collect reads the jobs and sends their series.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(e.ctx, e.timeout)
	defer cancel()
	start := time.Now()
	jobs, err := e.src.Summaries(ctx, RunsWindow)
	ch <- prometheus.MustNewConstMetric(e.duration, prometheus.GaugeValue, time.Since(start).Seconds())
	e.logScrape(err)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(e.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(e.up, prometheus.GaugeValue, 1)
	// Label values come from the table: escaped, so that a hostile job
	// name or holder id cannot act on the terminal of whoever reads them.
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		for i, l := range labels {
			labels[i] = escape.Printable(l)
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, j := range jobs {
		e.collectJob(j, gauge)
	}
}

// collectJob sends one job's series through gauge.
func (e *Exporter) collectJob(j inspect.JobSummary, gauge func(d *prometheus.Desc, v float64, labels ...string)) {
	if j.LastSuccess != nil {
		gauge(e.lastSuccess, unixSeconds(*j.LastSuccess), j.Job)
	}
	exit := -1
	if j.LastRun != nil {
		gauge(e.lastRun, unixSeconds(j.LastRun.FinishedAt), j.Job)
		if j.LastRun.ExitCode != nil {
			exit = *j.LastRun.ExitCode
		}
	}
	gauge(e.lastExit, float64(exit), j.Job)
	// Every known outcome has a series, 0 included, so that an alert
	// on a count works before the first such run; an outcome this
	// version does not know is shown as it is.
	for _, outcome := range lease.Outcomes {
		gauge(e.runs, float64(j.Runs[outcome]), j.Job, outcome)
	}
	for outcome, n := range j.Runs {
		if !slices.Contains(lease.Outcomes, outcome) {
			gauge(e.runs, float64(n), j.Job, outcome)
		}
	}
	gauge(e.held, boolValue(j.SlotsHeld > 0), j.Job)
	gauge(e.slotsHeld, float64(j.SlotsHeld), j.Job)
	gauge(e.slots, float64(j.Slots), j.Job)
	for _, h := range j.Holders {
		gauge(e.holder, 1, j.Job, h)
	}
	if next := j.Verdict.Next; next != nil {
		gauge(e.nextScheduled, unixSeconds(*next), j.Job)
	}
	for _, s := range inspect.States {
		if s != inspect.StateAbsent {
			gauge(e.state, boolValue(j.Verdict.State == s), j.Job, s)
		}
	}
	if j.LastRun != nil && j.LastRun.Origin != "" {
		gauge(e.lastOrigin, 1, j.Job, j.LastRun.Origin)
	}
	if p := j.Paused; p != nil {
		gauge(e.paused, 1, j.Job, p.By, p.Reason)
	}
}

// Probe reads the jobs once, as a scrape would, and logs a failure the
// same way. It returns how many jobs there are.
func (e *Exporter) Probe() (int, error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.timeout)
	defer cancel()
	jobs, err := e.src.Summaries(ctx, RunsWindow)
	e.logScrape(err)
	return len(jobs), err
}

// logScrape logs a failed scrape, and a success after failures. The same
// failure again is logged at debug only: an outage would otherwise write a
// line per scrape.
func (e *Exporter) logScrape(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err == nil && e.lastErr != "":
		e.log.Info().Msg("scrape read the database again")
		e.lastErr = ""
	case err == nil:
	case err.Error() == e.lastErr:
		e.log.Debug().Str("error", err.Error()).Msg("scrape failed")
	default:
		e.lastErr = err.Error()
		e.log.Error().Str("error", err.Error()).Msg("scrape failed: serving leasewrap_exporter_up 0")
	}
}

// RedactWith makes /readyz show every failure through redact: a server's
// error may quote what the connection string held. Call it before
// serving.
func (e *Exporter) RedactWith(redact func(error) error) { e.redact = redact }

// Handler serves /metrics (the jobs' series, next to the Go runtime's and
// the process's); /livez and /healthz, which answer 200 while the process
// serves (the exporter has no loop of its own to get stuck: each request
// reads the database afresh, so a liveness probe that failed with the
// database would only restart an exporter that is fine; whether the
// database answers is leasewrap_exporter_up's to say); and /readyz, which
// reads the jobs as a scrape does and answers 503 with the failure while
// the database cannot be read. GET patterns answer HEAD too.
func (e *Exporter) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(e, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /livez", ok)
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := e.Probe(); err != nil {
			if e.redact != nil {
				err = e.redact(err)
			}
			http.Error(w, "cannot read the jobs: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		ok(w, nil)
	})
	return mux
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
