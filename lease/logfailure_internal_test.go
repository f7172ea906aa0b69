package lease

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
)

// A standby that keeps failing warns once per cause, so that a server
// that comes back read-only after a restart ended the connection is named
// at warn, not hidden behind the restart's line for a minute.
func TestFailuresWarnOncePerCause(t *testing.T) {
	var buf bytes.Buffer
	s := &Store{log: zerolog.New(&buf)}
	ended := fmt.Errorf("cannot read holder: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"})
	readOnly := fmt.Errorf("cannot acquire: %w", &pgconn.PgError{Code: "25006", Message: "cannot execute SELECT in a read-only transaction"})
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	var last failureLog
	for _, err := range []error{ended, readOnly, readOnly, ended, readOnly, refused, refused} {
		s.logFailure(err, "j", &last)
	}
	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		levels = append(levels, strings.SplitN(strings.TrimPrefix(line, `{"level":"`), `"`, 2)[0])
	}
	want := "warn warn debug debug debug warn debug"
	if got := strings.Join(levels, " "); got != want {
		t.Errorf("levels %q, want %q:\n%s", got, want, buf.String())
	}
}
