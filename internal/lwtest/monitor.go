package lwtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request as a Monitor saw it.
type Request struct {
	Method, Path, UA, ContentType string
	Query                         url.Values
	Body                          string
}

// String is the request as "METHOD path body", the body trimmed.
func (r Request) String() string {
	return r.Method + " " + r.Path + " " + strings.TrimSpace(r.Body)
}

// Monitor is a local HTTP server that stands in for a ping monitor: it
// records every request, then answers it with its handler.
type Monitor struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []Request
	arrive chan struct{}
}

// NewMonitor starts a Monitor, closed when the test ends. handle, when not
// nil, answers the nth request (from 0); otherwise each gets 200 "OK".
func NewMonitor(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, n int)) *Monitor {
	t.Helper()
	m := &Monitor{arrive: make(chan struct{}, 1)}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		n := len(m.reqs)
		m.reqs = append(m.reqs, Request{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: string(body),
			UA: r.UserAgent(), ContentType: r.Header.Get("Content-Type"),
		})
		m.mu.Unlock()
		select {
		case m.arrive <- struct{}{}:
		default: // a wake-up is pending already
		}
		if handle != nil {
			handle(w, r, n)
			return
		}
		_, _ = io.WriteString(w, "OK")
	}))
	t.Cleanup(m.Close)
	return m
}

// NewHangingMonitor starts a Monitor that answers no request until the
// test ends.
func NewHangingMonitor(t testing.TB) *Monitor {
	t.Helper()
	release := make(chan struct{})
	m := NewMonitor(t, func(http.ResponseWriter, *http.Request, int) { <-release })
	// Cleanups run last first: the handlers return before Close waits
	// for them.
	t.Cleanup(func() { close(release) })
	return m
}

// Requests returns the requests received so far.
func (m *Monitor) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.reqs...)
}

// Lines returns the requests received so far as Request.String gives them.
func (m *Monitor) Lines() []string {
	var out []string
	for _, r := range m.Requests() {
		out = append(out, r.String())
	}
	return out
}

// Wait returns the requests once n have arrived, failing the test after
// 10 seconds.
func (m *Monitor) Wait(t testing.TB, n int) []Request {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if reqs := m.Requests(); len(reqs) >= n {
			return reqs
		}
		select {
		case <-m.arrive:
		case <-deadline:
			t.Fatalf("monitor got %d requests, want %d", len(m.Requests()), n)
		}
	}
}
