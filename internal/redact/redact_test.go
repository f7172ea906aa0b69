package redact

import (
	"bytes"
	"strings"
	"testing"
)

// A line is parsed only when it may hold a secret: one without the secret
// as written and without an escape is the very same slice, and one that
// hides the secret behind an escape is still masked.
func TestJSONParsesOnlyLinesThatMayHideASecret(t *testing.T) {
	r := New("postgres://u:s3cret@db/x")
	plain := []byte(`{"level":"info","job":"nightly","fencing_token":1,"message":"acquired"}` + "\n")
	got, ok := r.JSON(plain)
	if !ok || &got[0] != &plain[0] {
		t.Errorf("a line without the secret was rewritten: %q", got)
	}
	for _, line := range []string{
		`{"level":"error","error":"password s3cret refused","message":"x"}`,
		`{"level":"error","error":"password s\u0033cret refused","message":"x"}`,
		`{"level":"error","error":"password \"s3cret\" refused","message":"x"}`,
	} {
		got, ok := r.JSON([]byte(line))
		if !ok || bytes.Contains(got, []byte("s3cret")) || !bytes.Contains(got, []byte("password")) {
			t.Errorf("%s: got %s (%v), want the secret masked", line, got, ok)
		}
	}
	if _, ok := r.JSON([]byte(`{"a":"s3cret"`)); ok {
		t.Error("a broken line with the secret passed for JSON")
	}
}

// BenchmarkJSON is the cost of the redaction of a log line, with no secret
// in it (almost every line) and with one.
func BenchmarkJSON(b *testing.B) {
	r := New("postgres://u:s3cret@db/x")
	line := `{"level":"info","time":"2026-12-06T03:00:00Z","job":"nightly","holder":"host-1","fencing_token":1733454000000000,"message":"acquired"}` + "\n"
	for _, bc := range []struct{ name, line string }{
		{"none", line},
		{"secret", strings.Replace(line, "host-1", "s3cret", 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := []byte(bc.line)
			for b.Loop() {
				if _, ok := r.JSON(p); !ok {
					b.Fatal("not JSON")
				}
			}
		})
	}
}
