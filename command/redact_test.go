package command

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/redact"
)

// hostilePasswords are passwords that a substring replacement on the whole
// log line turns into broken JSON, or leaves in the output.
var hostilePasswords = []string{"1", "level", `"`, `\`, "xxxxx", "x", "pässwörd\u202e", "a\nb"}

// passwordURL is the test database's URL with password and database name
// (the server echoes a database name it does not know).
func passwordURL(d db, password, dbname string) string {
	cfg := d.pool.Config().ConnConfig
	u := url.URL{Scheme: "postgres", User: url.UserPassword(cfg.User, password),
		Host: fmt.Sprintf("%s:%d", cfg.Host, cfg.Port), Path: "/" + dbname, RawQuery: "sslmode=disable"}
	return u.String()
}

// stringValues returns every string in a decoded JSON value.
func stringValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, stringValues(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, stringValues(e)...)
		}
		return out
	}
	return nil
}

// Every JSON log line parses and keeps its fields, and no string in it holds
// the password: in a run that works (the server trusts the test user and
// ignores the password) and in one the server refuses, echoing a database
// name that is the password.
func TestRedactedJSONLogsStayJSON(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, pw := range hostilePasswords {
		t.Run(fmt.Sprintf("%q", pw), func(t *testing.T) {
			cfg := d.pool.Config().ConnConfig
			ok := lw(t, nil, "--database-url", passwordURL(d, pw, cfg.Database), "--table", d.table,
				"--log-format", "json", "--job", "redact", "--", "true")
			if got := ok.Wait(t, 15*time.Second); got != 0 {
				t.Fatalf("exit %d, want 0", got)
			}
			echo := lw(t, nil, "--database-url", passwordURL(d, pw, pw), "--table", d.table,
				"--log-format", "json", "--job", "redact", "--", "true")
			if got := echo.Wait(t, 15*time.Second); got != 69 {
				t.Fatalf("exit %d, want 69", got)
			}
			out := ok.Logs.String() + echo.Logs.String()
			var msgs []string
			for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				var e map[string]any
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("log line is not JSON (%v): %s", err, line)
				}
				if _, hasLevel := e["level"].(string); !hasLevel {
					t.Errorf("no level: %s", line)
				}
				if _, isNumber := e["fencing_token"].(float64); e["message"] == "acquired" && !isNumber {
					t.Errorf("acquired without its fencing_token number: %s", line)
				}
				for _, s := range stringValues(e) {
					if strings.Contains(s, pw) {
						t.Errorf("password %q in %q of: %s", pw, s, line)
					}
				}
				msgs = append(msgs, fmt.Sprint(e["message"]))
			}
			for _, want := range []string{"acquired", "released", "lease store unavailable"} {
				if !strings.Contains(strings.Join(msgs, "|"), want) {
					t.Errorf("no %q line among %q", want, msgs)
				}
			}
		})
	}
}

// The console format is made from the redacted JSON: its lines are whole,
// and the server's echo of the password is masked.
func TestRedactedConsoleLogs(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, pw := range []string{"level", "pässwörd\u202e", "INF"} {
		t.Run(pw, func(t *testing.T) {
			cfg := d.pool.Config().ConnConfig
			ok := lw(t, nil, "--database-url", passwordURL(d, pw, cfg.Database), "--table", d.table,
				"--log-format", "console", "--job", "redact", "--", "true")
			if got := ok.Wait(t, 15*time.Second); got != 0 {
				t.Fatalf("exit %d, want 0", got)
			}
			echo := lw(t, nil, "--database-url", passwordURL(d, pw, pw), "--table", d.table,
				"--log-format", "console", "--job", "redact", "--", "true")
			if got := echo.Wait(t, 15*time.Second); got != 69 {
				t.Fatalf("exit %d, want 69", got)
			}
			if out := noColour(ok.Logs.String()); !strings.Contains(out, " INF acquired") || !strings.Contains(out, " INF released") {
				t.Errorf("console lines not whole:\n%s", out)
			}
			if out := noColour(echo.Logs.String()); !strings.Contains(out, " ERR lease store unavailable") || strings.Contains(out, pw) {
				t.Errorf("want the failure with the password masked:\n%s", out)
			}
		})
	}
}

var colour = regexp.MustCompile("\x1b\\[[0-9;]*m")

// noColour removes the console format's colours.
func noColour(s string) string { return colour.ReplaceAllString(s, "") }

// The mask never is, nor completes, a password, and text without one is
// left alone.
func TestRedactorMask(t *testing.T) {
	for _, tc := range []struct{ secret, in, want string }{
		{"s3cret", "pw s3cret here", "pw xxxxx here"},
		{"ax", "aax", "a*****"},
		{"xxxxx", "db xxxxx", "db *****"},
		{"x*#_.", "a x*#_. b", "a  b"},
		{"ab", "aabb", ""},
	} {
		r := redact.New("")
		r.Add(tc.secret)
		got := r.String(tc.in)
		if strings.Contains(got, tc.secret) || tc.want != "" && got != tc.want {
			t.Errorf("secret %q in %q: got %q, want %q", tc.secret, tc.in, got, tc.want)
		}
	}
}
