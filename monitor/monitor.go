// Package monitor tells the outside world how a wrapper is doing, over
// HTTP: whether the process is stuck (/livez), whether it reaches its
// database (/readyz, and /healthz with the same meaning), whether this
// instance leads (/leader), and Prometheus metrics.
package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
)

// StuckAfter is how long the loops of a wrapper with timings t may go
// without turning before /livez calls the process stuck. Every loop turns
// at least once a TTL while it waits (a standby looks at the lease by its
// expiry, a leader renews, a scheduler wakes, one standing by for its
// database tries again every retry interval), and one turn's database
// work takes at most a TTL or a connection attempt
// (lease.DefaultConnectTimeout); the bound is twice their sum, so that a
// loaded machine or a slow database is not taken for a stuck process.
func StuckAfter(t lease.Timings) time.Duration {
	return 2 * (t.TTL + max(t.TTL, lease.DefaultConnectTimeout))
}

// Leader is what /leader reports on (*lease.Lease has it).
type Leader interface {
	Token() int64
	Remaining() time.Duration
	Done() <-chan struct{}
}

// Monitor collects a wrapper's state and metrics. It is a lease.Observer.
type Monitor struct {
	job, holder string
	// staleAfter is how old the last database contact may be for the
	// wrapper to count as ready.
	staleAfter time.Duration
	// stuckAfter is how long its loops may go without turning before it
	// counts as stuck (StuckAfter).
	stuckAfter time.Duration
	// now is the clock /livez, /readyz and /healthz judge by (time.Now).
	now func() time.Time

	mu          sync.Mutex
	lastTurn    time.Time
	lastContact time.Time
	lastErr     error
	redact      func(error) error // nil: errors are shown as they are
	leader      Leader

	metrics *metrics // nil: no --http-addr, nothing to serve them on
}

// metrics are a wrapper's Prometheus series, next to the Go runtime's and
// the process's.
type metrics struct {
	registry      *prometheus.Registry
	isLeader      prometheus.Gauge
	acquisitions  prometheus.Counter
	renewals      *prometheus.CounterVec
	renewLatency  prometheus.Histogram
	losses        prometheus.Counter
	rowRegression prometheus.Counter
	childStarts   prometheus.Counter
	childExits    *prometheus.CounterVec
	historyFails  prometheus.Counter
	unreachable   prometheus.Counter
}

var (
	_ lease.Observer        = (*Monitor)(nil)
	_ lease.HistoryObserver = (*Monitor)(nil)
)

// New returns a Monitor for one job and holder, whose lease has timings
// t. A wrapper counts as ready while it heard from the database within a
// TTL, and as live while its loops turned within StuckAfter(t). Metrics
// are kept only withMetrics: building the registry costs start-up time
// that a cron run without --http-addr should not pay.
func New(job, holder string, t lease.Timings, withMetrics bool) *Monitor {
	m := &Monitor{job: job, holder: holder, staleAfter: t.TTL, stuckAfter: StuckAfter(t), now: time.Now}
	m.lastTurn = m.now()
	if withMetrics {
		m.metrics = newMetrics(job)
	}
	return m
}

func newMetrics(job string) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := promauto.With(prometheus.WrapRegistererWith(prometheus.Labels{"lease": escape.Printable(job)}, reg))
	m := &metrics{
		registry: reg,
		isLeader: f.NewGauge(prometheus.GaugeOpts{Name: "leasewrap_is_leader",
			Help: "1 while this instance holds the lease, else 0."}),
		acquisitions: f.NewCounter(prometheus.CounterOpts{Name: "leasewrap_acquisitions_total",
			Help: "Leases acquired by this instance."}),
		renewals: f.NewCounterVec(prometheus.CounterOpts{Name: "leasewrap_renewals_total",
			Help: "Renewal attempts by result: ok, failed (the database did not answer), lost."}, []string{"result"}),
		renewLatency: f.NewHistogram(prometheus.HistogramOpts{Name: "leasewrap_renewal_duration_seconds",
			Help:    "How long renewal statements took, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		losses: f.NewCounter(prometheus.CounterOpts{Name: "leasewrap_lease_losses_total",
			Help: "Leases lost while held: taken over, released by an operator, or not renewed in time."}),
		rowRegression: f.NewCounter(prometheus.CounterOpts{Name: "leasewrap_lease_row_regressions_total",
			Help: "Renewals that found the lease row older than this holder had written it: an asynchronous failover, a restore or a manual delete."}),
		childStarts: f.NewCounter(prometheus.CounterOpts{Name: "leasewrap_child_starts_total",
			Help: "Commands started."}),
		childExits: f.NewCounterVec(prometheus.CounterOpts{Name: "leasewrap_child_exits_total",
			Help: "Commands ended, by exit status (128+N for signal N)."}, []string{"status"}),
		historyFails: f.NewCounter(prometheus.CounterOpts{Name: "leasewrap_history_write_failures_total",
			Help: "Times this instance gave up recording runs in the history table (broken, missing, or not writable by its role); the job runs on under its lease."}),
		unreachable: f.NewCounter(prometheus.CounterOpts{Name: "leasewrap_database_unreachable_total",
			Help: "Attempts to reach the database that failed (refused, timed out, the server starting up) of a --wait standby or a scheduler at its start, and of a scheduler since; it tries again every retry interval."}),
	}
	// Series that exist from the start, so rate() and alerts work before
	// the first event.
	for _, result := range []string{"ok", "failed", "lost"} {
		m.renewals.WithLabelValues(result)
	}
	m.childExits.WithLabelValues("0")
	return m
}

// Turned records that a loop of the wrapper turned: the run loop, a
// standby's or a scheduler's. The statements the loops send (Contacted,
// Failed, Unreachable) and a leader's renewals (Renewed) count as turns
// too; a keepalive (Reached) does not, for it comes from a listening
// connection's own goroutine, which turns while the loop may be stuck.
func (m *Monitor) Turned() {
	m.mu.Lock()
	m.lastTurn = m.now()
	m.mu.Unlock()
}

// Contacted records that the database answered.
func (m *Monitor) Contacted() {
	m.mu.Lock()
	m.lastContact = m.now()
	m.lastTurn = m.lastContact
	m.lastErr = nil
	m.mu.Unlock()
}

// Reached records that the database answered a keepalive: it keeps the
// contact recent without clearing a failed statement's error, which only
// a statement that succeeds clears.
func (m *Monitor) Reached() {
	m.mu.Lock()
	m.lastContact = m.now()
	m.mu.Unlock()
}

// Failed records a statement that the database did not carry out.
func (m *Monitor) Failed(err error) {
	if m.redact != nil {
		err = m.redact(err)
	}
	m.mu.Lock()
	m.lastErr = err
	m.lastTurn = m.now()
	m.mu.Unlock()
}

// RedactWith makes /healthz show every failure through redact: a server's
// error may quote what the connection string held. Call it before the
// first failure.
func (m *Monitor) RedactWith(redact func(error) error) { m.redact = redact }

// Unreachable records an attempt to reach the database that failed, for
// /healthz and the metrics.
func (m *Monitor) Unreachable(err error) {
	m.Failed(err)
	if m.metrics != nil {
		m.metrics.unreachable.Inc()
	}
}

// Renewed records a renewal attempt.
func (m *Monitor) Renewed(took time.Duration, err error) {
	m.Turned()
	if m.metrics == nil {
		return
	}
	m.metrics.renewLatency.Observe(took.Seconds())
	switch {
	case err == nil:
		m.metrics.renewals.WithLabelValues("ok").Inc()
	case errors.Is(err, lease.ErrLost):
		m.metrics.renewals.WithLabelValues("lost").Inc()
	default:
		m.metrics.renewals.WithLabelValues("failed").Inc()
	}
}

// Lost records the loss of a held lease.
func (m *Monitor) Lost(err error) {
	if m.metrics == nil {
		return
	}
	m.metrics.losses.Inc()
	if errors.Is(err, lease.ErrRowRegressed) {
		m.metrics.rowRegression.Inc()
	}
	m.metrics.isLeader.Set(0)
}

// HistoryFailed counts a history table that runs could not be recorded in.
func (m *Monitor) HistoryFailed(error) {
	if m.metrics != nil {
		m.metrics.historyFails.Inc()
	}
}

// Leading records that this instance acquired l and leads until l is done.
func (m *Monitor) Leading(l Leader) {
	if m.metrics != nil {
		m.metrics.acquisitions.Inc()
		m.metrics.isLeader.Set(1)
	}
	m.mu.Lock()
	m.leader = l
	m.mu.Unlock()
}

// NotLeading records that this instance gave its lease back.
func (m *Monitor) NotLeading() {
	if m.metrics != nil {
		m.metrics.isLeader.Set(0)
	}
	m.mu.Lock()
	m.leader = nil
	m.mu.Unlock()
}

// ChildStarted counts a started command.
func (m *Monitor) ChildStarted() {
	if m.metrics != nil {
		m.metrics.childStarts.Inc()
	}
}

// ChildExited counts an ended command by its status.
func (m *Monitor) ChildExited(status int) {
	if m.metrics != nil {
		m.metrics.childExits.WithLabelValues(strconv.Itoa(status)).Inc()
	}
}

// Handler serves /livez, /readyz, /healthz (as /readyz), /leader and,
// with metrics, /metrics. GET patterns answer HEAD too.
func (m *Monitor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", m.livez)
	mux.HandleFunc("GET /readyz", m.readyz)
	mux.HandleFunc("GET /healthz", m.readyz)
	mux.HandleFunc("GET /leader", m.leaderz)
	if m.metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(m.metrics.registry, promhttp.HandlerOpts{}))
	}
	return mux
}

// livez is 200 while the wrapper's loops turned within the bound, else
// 503: the process is stuck, and only a restart mends that. A database
// out of reach does not fail it: the loops turn while they wait for it.
func (m *Monitor) livez(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	since := m.now().Sub(m.lastTurn)
	m.mu.Unlock()
	if since > m.stuckAfter {
		http.Error(w, "stuck: no loop of the process turned in "+since.Round(time.Second).String()+
			" (the bound is "+m.stuckAfter.String()+")", http.StatusServiceUnavailable)
		return
	}
	ok(w, nil)
}

// ok answers 200 "ok"; an http.HandlerFunc.
func ok(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Length", "3")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz (also /healthz) is 200 while the database was heard from
// recently and the newest statement succeeded, else 503 with the failure.
func (m *Monitor) readyz(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	last, lastErr := m.lastContact, m.lastErr
	m.mu.Unlock()
	switch {
	case last.IsZero() || m.now().Sub(last) > m.staleAfter:
		msg := "no recent contact with the lease database"
		if lastErr != nil {
			msg += ": " + lastErr.Error()
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	case lastErr != nil:
		// The database answers, but refuses what this instance must do: a
		// read-only server after a failover, a missing privilege.
		http.Error(w, "the newest statement failed: "+lastErr.Error(), http.StatusServiceUnavailable)
		return
	}
	ok(w, nil)
}

// leaderz is 200 with the lease while this instance leads, else 503. self
// is this instance's holder id; holder, the lease's holder, appears only
// while that is this instance: a standby does not know the leader, and
// its own id under "holder" would read as the leader's.
func (m *Monitor) leaderz(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	l := m.leader
	m.mu.Unlock()
	leading := l != nil
	if leading {
		select {
		case <-l.Done():
			leading = false
		default:
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !leading {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(leaderJSON{Job: m.job, Self: m.holder})
		return
	}
	token, expiresIn := l.Token(), l.Remaining().Seconds()
	_ = json.NewEncoder(w).Encode(leaderJSON{Job: m.job, Self: m.holder, Holder: m.holder, Leader: true,
		FencingToken: &token, ExpiresIn: &expiresIn})
}

// leaderJSON is the stable shape of /leader.
type leaderJSON struct {
	Job  string `json:"job"`
	Self string `json:"self"`
	// Holder is the lease's holder, set only on the leader, where it is
	// Self.
	Holder       string   `json:"holder,omitempty"`
	Leader       bool     `json:"leader"`
	FencingToken *int64   `json:"fencing_token,omitempty"`
	ExpiresIn    *float64 `json:"expires_in,omitempty"`
}

// Serve listens on addr and serves h until the returned stop is called,
// which closes the listener and waits (briefly) for requests in flight.
func Serve(addr string, h http.Handler) (stop func(), bound net.Addr, err error) {
	return ServeWith(addr, h, (*http.Server).Serve)
}

// ServeWith is Serve with serve in place of http.Server's Serve: the
// exporter's serves with TLS and basic auth when configured.
func ServeWith(addr string, h http.Handler, serve func(*http.Server, net.Listener) error) (stop func(), bound net.Addr, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	done := make(chan struct{})
	go func() {
		_ = serve(srv, ln)
		close(done)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, ln.Addr(), nil
}
