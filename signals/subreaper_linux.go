//go:build linux

package signals

import "golang.org/x/sys/unix"

// becomeSubreaper marks the process as a child subreaper: an orphan among
// its descendants (a `setsid cmd &`, a double fork) is reparented to it
// rather than to init, so it stays one of its children and can be found,
// stopped and reaped.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
