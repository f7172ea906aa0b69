package lease

import (
	"context"
	"time"
)

// Clock is the local clock a lease keeps its deadline on. It must count time
// the machine spent suspended (see now), or a resumed host would believe it
// still leads after its lease expired in the database.
type Clock interface {
	// Now returns the time since an arbitrary fixed point.
	Now() time.Duration
	// Wait returns after d has passed on this clock, or ctx's error when ctx
	// ends first.
	Wait(ctx context.Context, d time.Duration) error
}

// bootClock is the real clock: CLOCK_BOOTTIME where there is one.
type bootClock struct{}

func (bootClock) Now() time.Duration { return now() }

func (bootClock) Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var processStart = time.Now()

// monotonicNow reads Go's monotonic clock. It is the portable fallback for
// the local deadline: on systems without CLOCK_BOOTTIME it may not count time
// spent suspended, so a suspended host can overrun its lease on waking (see
// the limits in docs/guarantees.md).
func monotonicNow() time.Duration {
	return time.Since(processStart)
}
