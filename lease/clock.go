package lease

import "time"

var processStart = time.Now()

// monotonicNow reads Go's monotonic clock. It is the portable fallback for
// the local deadline: on systems without CLOCK_BOOTTIME it may not count time
// spent suspended, so a suspended host can overrun its lease on waking (see
// the README's limits).
func monotonicNow() time.Duration {
	return time.Since(processStart)
}
