// Package signals knows Unix signals and process groups: which signals a
// wrapper forwards, how a child is put in its own group, and how a whole
// group is signalled.
package signals

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Forwarded are the signals a wrapper passes on to its child's process
// group. SIGCHLD is deliberately absent: it reports on the wrapper's own
// children and means nothing to the child.
var Forwarded = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH,
}

// Notify starts catching the Forwarded signals, so that none of them takes
// its default action on the wrapper (most would kill it and orphan the
// child). Call stop to restore the defaults.
func Notify() (ch <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 16)
	signal.Notify(c, Forwarded...)
	return c, func() { signal.Stop(c) }
}

// Ends reports whether sig asks a process to end (HUP, INT, QUIT, TERM),
// as opposed to a notification such as USR1 or WINCH.
func Ends(sig os.Signal) bool {
	switch sig {
	case unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM:
		return true
	}
	return false
}

// Number returns sig's number, for the 128+N exit status convention.
func Number(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// ChildAttr returns the process attributes for a child: its own process
// group (so signals can reach its whole tree) and, where the platform has
// it, death with its parent.
func ChildAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(attr)
	return attr
}

// Group sends sig to every process in process group pgid. A group that is
// already gone is not an error.
func Group(pgid int, sig syscall.Signal) error {
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// GroupAlive reports whether any process of group pgid still exists.
func GroupAlive(pgid int) bool {
	err := unix.Kill(-pgid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
