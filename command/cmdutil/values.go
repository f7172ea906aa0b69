package cmdutil

import "time"

// Small helpers on values that the commands and the views share.

// MaxTime is the later of a and b.
func MaxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// MinTime is the earlier of a and b.
func MinTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Ptr points to a copy of v, for the optional fields of the JSON views.
func Ptr[T any](v T) *T { return &v }
