//go:build linux

package signals

import "golang.org/x/sys/unix"

// Undumpable keeps the other processes of the same user, the command
// among them, out of this one: the kernel then gives its /proc/<pid>
// entries to root, so that its environment (/proc/<pid>/environ, where a
// password in LEASEWRAP_DATABASE_URL is), memory and file descriptors are
// root's to read, and only root can trace it. It also writes no core dump.
// The flag holds for the whole process; a child gets its own back when it
// executes its command. /proc/<pid>/cmdline and /proc/<pid>/stat stay
// readable by every user, and the process reads its own entries as before.
func Undumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
