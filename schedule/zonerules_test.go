package schedule

import (
	"testing"
	"time"
)

// Hosts whose zone data give Europe/Berlin another offset compute other
// times for one spec: their fingerprints differ, and the same data give
// the same one.
func TestZoneRulesTellZoneDataApart(t *testing.T) {
	s, err := Parse("24 16 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	same, err := Parse("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := s.ZoneRules(2026), same.ZoneRules(2026); a == "" || a != b {
		t.Fatalf("one zone, one data: %q and %q", a, b)
	}
	// A zone of the same name with an offset of +1:02 all year round.
	other := *s
	other.loc = time.FixedZone("Europe/Berlin", 3720)
	if s.ZoneRules(2026) == other.ZoneRules(2026) {
		t.Fatalf("other zone data give the same fingerprint %q", s.ZoneRules(2026))
	}
	if y, err := ZoneRulesYear(s.ZoneRules(2026)); err != nil || y != 2026 {
		t.Errorf("year %d (%v), want 2026", y, err)
	}
	for _, spec := range []string{"@every 2s", "CRON_TZ=UTC 0 2 * * *"} {
		p, err := Parse(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		if r := p.ZoneRules(2026); r != "" {
			t.Errorf("%s depends on no zone data, got %q", spec, r)
		}
	}
}
