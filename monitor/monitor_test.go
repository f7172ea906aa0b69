package monitor

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
)

// healthz is what the monitor's /healthz answers now.
func healthz(m *Monitor) (int, string) { return probe(m, "/healthz") }

// probe is what the monitor answers on path now.
func probe(m *Monitor, path string) (int, string) {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// fakeClock is a monitor's clock that a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func withClock(m *Monitor, c *fakeClock) *Monitor {
	m.now = c.now
	m.lastTurn = c.now()
	return m
}

// A keepalive that the database answers keeps the contact recent, but only
// a statement that succeeds clears the failure of the last one: a server
// that can be reached yet refuses every statement (read-only after a
// failover) stays unhealthy.
func TestReachedKeepsAFailedStatementsError(t *testing.T) {
	m := New("j", "h", lease.Timings{TTL: time.Hour}, false)
	if code, _ := healthz(m); code != http.StatusServiceUnavailable {
		t.Errorf("before any contact: %d, want 503", code)
	}
	m.Reached()
	if code, body := healthz(m); code != http.StatusOK {
		t.Errorf("after a keepalive: %d %q, want 200", code, body)
	}
	m.Failed(errors.New("cannot execute UPDATE in a read-only transaction"))
	m.Reached()
	if code, body := healthz(m); code != http.StatusServiceUnavailable || !strings.Contains(body, "read-only") {
		t.Errorf("a keepalive after a failed statement: %d %q, want 503 with the failure", code, body)
	}
	m.Contacted()
	if code, body := healthz(m); code != http.StatusOK {
		t.Errorf("a statement that succeeded: %d %q, want 200", code, body)
	}
}

// A failure is shown through the redaction the monitor was given: a
// server's error may quote the connection string's password.
func TestFailuresAreShownRedacted(t *testing.T) {
	m := New("j", "h", lease.Timings{TTL: time.Hour}, false)
	m.RedactWith(func(err error) error { return errors.New(strings.ReplaceAll(err.Error(), "s3cret", "xxxxx")) })
	m.Failed(errors.New(`database "s3cret" does not exist`))
	if code, body := healthz(m); code != http.StatusServiceUnavailable || strings.Contains(body, "s3cret") || !strings.Contains(body, "xxxxx") {
		t.Errorf("/healthz answered %d %q, want 503 with the failure redacted", code, body)
	}
}

// The bound /livez holds the loops to covers the longest wait of a
// healthy loop (a TTL) and a turn's database work (a TTL, or a connection
// attempt's default timeout when that is longer), twice over.
func TestStuckAfterCoversAWaitAndATurn(t *testing.T) {
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{lease.DefaultTTL, 180 * time.Second},
		// A short TTL: a connection attempt may still take its 10 s.
		{3 * time.Second, 26 * time.Second},
	} {
		tm := lease.DeriveTimings(tc.ttl)
		got := StuckAfter(tm)
		if got != tc.want {
			t.Errorf("StuckAfter(ttl %s) = %s, want %s", tc.ttl, got, tc.want)
		}
		if wait, turn := tm.TTL, max(tm.TTL, lease.DefaultConnectTimeout); got < 2*(wait+turn) {
			t.Errorf("StuckAfter(ttl %s) = %s leaves no room for a wait of %s and a turn of %s on a loaded machine", tc.ttl, got, wait, turn)
		}
	}
}

// /livez answers 200 while a loop turned within StuckAfter, and 503 once
// none did: each kind of turn (a loop's own, a statement answered or
// failed, a renewal) holds it off, and a keepalive, which a listening
// connection's goroutine sends whatever the loop does, does not.
func TestLivezFailsOnlyWhenNoLoopTurned(t *testing.T) {
	tm := lease.DeriveTimings(3 * time.Second)
	bound := StuckAfter(tm)
	for _, turn := range []struct {
		name string
		do   func(*Monitor)
	}{
		{"Turned", (*Monitor).Turned},
		{"Contacted", (*Monitor).Contacted},
		{"Failed", func(m *Monitor) { m.Failed(errors.New("connection refused")) }},
		{"Unreachable", func(m *Monitor) { m.Unreachable(errors.New("connection refused")) }},
		{"Renewed", func(m *Monitor) { m.Renewed(time.Millisecond, nil) }},
	} {
		t.Run(turn.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1e9, 0)}
			m := withClock(New("j", "h", tm, true), c)
			if code, body := probe(m, "/livez"); code != http.StatusOK || body != "ok\n" {
				t.Fatalf("at start: %d %q, want 200 ok", code, body)
			}
			c.add(bound - time.Second)
			turn.do(m)
			c.add(bound)
			if code, body := probe(m, "/livez"); code != http.StatusOK {
				t.Errorf("%s after a turn %s ago: %d %q, want 200", bound, turn.name, code, body)
			}
			m.Reached()
			c.add(time.Second + time.Millisecond)
			code, body := probe(m, "/livez")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "stuck") || !strings.Contains(body, bound.String()) {
				t.Errorf("no turn for just over %s (a keepalive aside): %d %q, want 503 saying stuck and the bound", bound, code, body)
			}
		})
	}
}

// While the database is out of reach and the loops keep trying, /livez
// stays 200 (a restart would not bring the database back), /readyz and
// /healthz answer 503 with the failure; once it answers, all three are 200.
func TestProbesDuringAnOutage(t *testing.T) {
	tm := lease.DeriveTimings(3 * time.Second)
	c := &fakeClock{t: time.Unix(1e9, 0)}
	m := withClock(New("j", "h", tm, false), c)
	m.Contacted()
	// Longer than the TTL and than StuckAfter, a try every retry interval.
	for end := c.t.Add(3 * StuckAfter(tm)); c.t.Before(end); c.add(tm.RetryInterval) {
		m.Unreachable(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
	}
	if code, body := probe(m, "/livez"); code != http.StatusOK {
		t.Errorf("/livez during the outage: %d %q, want 200", code, body)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := probe(m, path); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") {
			t.Errorf("%s during the outage: %d %q, want 503 with the failure", path, code, body)
		}
	}
	m.Contacted()
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		if code, body := probe(m, path); code != http.StatusOK {
			t.Errorf("%s once the database answers: %d %q, want 200", path, code, body)
		}
	}
}

// summaries is a Summarizer that answers err.
type summaries struct{ err error }

func (s summaries) Summaries(context.Context, time.Duration) ([]inspect.JobSummary, error) {
	return nil, s.err
}

// The exporter has no loop of its own: /livez and /healthz answer 200
// while it serves, whatever the database does; /readyz reads the jobs and
// answers 503 with the failure while it cannot.
func TestExporterProbes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		ready int
	}{
		{"database answers", nil, http.StatusOK},
		{"database out of reach", errors.New(`database "s3cret": dial tcp 127.0.0.1:5432: connect: connection refused`), http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewExporter(context.Background(), summaries{tc.err}, time.Second, zerolog.Nop())
			e.RedactWith(func(err error) error { return errors.New(strings.ReplaceAll(err.Error(), "s3cret", "xxxxx")) })
			h := e.Handler()
			answer := func(path string) (int, string) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				return rec.Code, rec.Body.String()
			}
			for _, path := range []string{"/livez", "/healthz"} {
				if code, body := answer(path); code != http.StatusOK {
					t.Errorf("%s: %d %q, want 200", path, code, body)
				}
			}
			code, body := answer("/readyz")
			if code != tc.ready || tc.err != nil && (!strings.Contains(body, "connection refused") || strings.Contains(body, "s3cret")) {
				t.Errorf("/readyz: %d %q, want %d (with the failure, redacted)", code, body, tc.ready)
			}
		})
	}
}
