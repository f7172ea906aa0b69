//go:build linux

package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// now reads CLOCK_BOOTTIME, which keeps counting while the machine is
// suspended. A lease's local deadline must not stand still while the
// database's clock runs on, or a resumed laptop or VM would believe it still
// leads after its lease expired.
func now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return monotonicNow()
	}
	return time.Duration(ts.Nano())
}
