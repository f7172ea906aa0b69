package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary specs and zones to Parse: it must never panic,
// must refuse with ErrInvalid on one line, and what it accepts must print a
// Spec that parses back to itself and give due times strictly after the
// instant asked.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"0 2 * * *", "@daily", "@every 2s", "CRON_TZ=Europe/Berlin 30 2 * * *", "TZ=", "TZ= ", "CRON_TZ=x",
		"*/0 * * * *", "1-0/3 * * * *", "22-2 * * * *", "0 0 29 2 *", "0 0 * * sun-sat", "@every 9999999h",
		"0-59/60 * * * *", "? ? ? ? ?", "0 0 31 2,4 1", "@every 1s0ns", "H H * * *",
	} {
		f.Add(seed, "")
	}
	f.Add("0 1 * * *", "America/New_York")
	f.Add("@hourly", "Asia/Beirut")
	from := time.Date(2026, 3, 29, 0, 59, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec, zone string) {
		s, err := Parse(spec, zone)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Parse(%q, %q): %q", spec, zone, err)
			}
			return
		}
		again, err := Parse(s.Spec(), "")
		if err != nil || again.Spec() != s.Spec() {
			t.Fatalf("Spec %q of %q parses back as %v, %v", s.Spec(), spec, again, err)
		}
		if next := s.Next(from); !next.IsZero() && !next.After(from) {
			t.Fatalf("%s: Next(%v) = %v", s.Spec(), from, next)
		}
	})
}
