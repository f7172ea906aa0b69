package timefmt

import (
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC), "2026-03-01 06:00:00Z"},
		{time.Date(2026, 3, 1, 7, 0, 0, 999_999_999, berlin), "2026-03-01 06:00:00Z"},
		{time.Date(2026, 1, 1, 0, 30, 5, 0, berlin), "2025-12-31 23:30:05Z"},
	} {
		if got := Stamp(tc.in); got != tc.want {
			t.Errorf("Stamp(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUTC(t *testing.T) {
	if got := UTC(nil); got != nil {
		t.Errorf("UTC(nil) = %v, want nil", got)
	}
	in := time.Date(2026, 3, 1, 7, 0, 0, 5, time.FixedZone("CET", 3600))
	got := UTC(&in)
	if got == &in || got.Location() != time.UTC || !got.Equal(in) || got.Nanosecond() != 5 {
		t.Errorf("UTC(%v) = %v (at %p, the input at %p), want the same instant in UTC, a copy", in, got, got, &in)
	}
	if in.Location() == time.UTC {
		t.Errorf("UTC changed its input to %v", in)
	}
}
