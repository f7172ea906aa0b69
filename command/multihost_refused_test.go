package command

import (
	"strings"
	"testing"
	"time"
)

// A connection string of several hosts that all refuse says why each one
// failed, once each (pgx tries each host with TLS and then without), on the
// one log line and check's one line, without a stray ":;" and without the
// password.
func TestRefusedMultiHostConnectionSaysEachHostOnce(t *testing.T) {
	t.Parallel()
	const dsn = "host=127.0.0.1,127.0.0.1 port=1,2 user=postgres password=s3cr3t-pw dbname=test connect_timeout=2"
	const want = "failed to connect to `user=postgres database=test`: " +
		"127.0.0.1:1 (127.0.0.1): dial error: dial tcp 127.0.0.1:1: connect: connection refused; " +
		"127.0.0.1:2 (127.0.0.1): dial error: dial tcp 127.0.0.1:2: connect: connection refused"
	p := lw(t, nil, "--database-url", dsn, "--job", "j", "--log-format", "json", "--", "true")
	if got := p.Wait(t, 15*time.Second); got != 69 {
		t.Errorf("exit %d, want 69", got)
	}
	e := p.WaitLog(t, "lease store unavailable")
	if got := e["error"]; got != `cannot acquire lease "j": `+want {
		t.Errorf("error %q,\nwant %q", got, `cannot acquire lease "j": `+want)
	}
	c := lw(t, nil, "check", "--database-url", dsn, "--job", "j", "--max-age", "1h")
	if got := c.Wait(t, 15*time.Second); got != 3 {
		t.Errorf("check exited %d, want 3", got)
	}
	if got := stdoutOf(c); !strings.HasSuffix(got, ": "+want+"\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("check said %q, want one line ending in %q", got, want)
	}
	if logs := p.Logs.String() + c.Logs.String(); strings.Contains(logs, "s3cr3t-pw") || strings.Contains(logs, ":;") {
		t.Errorf("the password or a stray \":;\" in the output: %s", logs)
	}
}
