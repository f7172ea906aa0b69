// Package timefmt writes times the way every leasewrap view does: in UTC,
// to the second for people (the tables, the timeline, a verdict's reason)
// and in full for machines (the JSON views).
package timefmt

import "time"

// Stamp writes t for people: in UTC, to the second, as in
// 2026-03-01 06:00:00Z.
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// UTC returns a copy of *t in UTC for a JSON view, or nil for nil.
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
