package monitor

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// healthz is what the monitor's /healthz answers now.
func healthz(m *Monitor) (int, string) {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// A keepalive that the database answers keeps the contact recent, but only
// a statement that succeeds clears the failure of the last one: a server
// that can be reached yet refuses every statement (read-only after a
// failover) stays unhealthy.
func TestReachedKeepsAFailedStatementsError(t *testing.T) {
	m := New("j", "h", time.Hour, false)
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
	m := New("j", "h", time.Hour, false)
	m.RedactWith(func(err error) error { return errors.New(strings.ReplaceAll(err.Error(), "s3cret", "xxxxx")) })
	m.Failed(errors.New(`database "s3cret" does not exist`))
	if code, body := healthz(m); code != http.StatusServiceUnavailable || strings.Contains(body, "s3cret") || !strings.Contains(body, "xxxxx") {
		t.Errorf("/healthz answered %d %q, want 503 with the failure redacted", code, body)
	}
}
