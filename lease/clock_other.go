//go:build !linux

package lease

import "time"

// now falls back to the monotonic clock where CLOCK_BOOTTIME does not exist.
func now() time.Duration {
	return monotonicNow()
}
