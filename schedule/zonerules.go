package schedule

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ZoneYears is how many years, from the year a fingerprint starts in,
// ZoneRules covers.
const ZoneYears = 10

// ZoneRules returns a fingerprint of the zone data the schedule's times
// are computed with: each UTC offset of its zone and when it begins, from
// the start of year for ZoneYears years, as "YEAR:HEX". It is "" for a
// schedule whose times depend on no zone data (@every, or UTC).
//
// Each host reads its own zone data (the system's, ZONEINFO, or the copy
// built into the binary), and zones change their rules: two instances
// whose data differ compute different times for the same spec, and
// would run one wall-clock time twice. Their fingerprints differ too.
func (s *Schedule) ZoneRules(year int) string {
	if s.every > 0 || s.zone == "UTC" {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(s.zone))
	t := time.Date(year, time.January, 1, 0, 0, 0, 0, time.UTC)
	end := t.AddDate(ZoneYears, 0, 0)
	last := -1 << 31
	var buf [16]byte
	for t.Before(end) {
		_, off := t.In(s.loc).Zone()
		if off != last {
			binary.BigEndian.PutUint64(buf[:8], uint64(t.Unix()))
			binary.BigEndian.PutUint64(buf[8:], uint64(int64(off)))
			h.Write(buf[:])
			last = off
		}
		_, next := t.In(s.loc).ZoneBounds()
		if !next.After(t) {
			break
		}
		t = next
	}
	return strconv.Itoa(year) + ":" + hex.EncodeToString(h.Sum(nil)[:8])
}

// ZoneRulesYear is the year a fingerprint of ZoneRules starts in.
func ZoneRulesYear(rules string) (int, error) {
	y, _, ok := strings.Cut(rules, ":")
	year, err := strconv.Atoi(y)
	if !ok || err != nil {
		return 0, fmt.Errorf("%q is not a zone data fingerprint", rules)
	}
	return year, nil
}
