// Package signals knows Unix signals, processes and reaping: which signals a
// wrapper forwards, how a child is put in its own group, how a whole group
// is signalled, how orphans are kept (a subreaper on Linux) and reaped
// without racing exec.Cmd.Wait, and how a process's descendants are found
// in the process table.
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
	// SIGTSTP must not stop the wrapper alone: its child would run on with
	// no one renewing the lease. It stops the child instead, while the
	// wrapper keeps the lease; SIGCONT resumes it.
	unix.SIGTSTP, unix.SIGCONT,
}

// Notify starts catching the Forwarded signals, so that none of them takes
// its default action on the wrapper (most would kill it and orphan the
// child). It also catches SIGPIPE, which would otherwise kill the wrapper
// when its stderr reader goes away; catching (unlike ignoring) is not passed
// on to the child. Call stop to restore the defaults.
func Notify() (ch <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 16)
	signal.Notify(c, Forwarded...)
	pipe := make(chan os.Signal, 1) // never read: a full channel drops the signal
	signal.Notify(pipe, unix.SIGPIPE)
	return c, func() { signal.Stop(c); signal.Stop(pipe) }
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

// Name returns sig's name, as in SIGTERM (its Go name for a signal that
// is not a Unix one).
func Name(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
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
// it, death with its parent. When the wrapper runs in the foreground of the
// terminal on stdin, the child's group is made the foreground one instead:
// it can read the terminal, and Ctrl-C or Ctrl-Z reach it once, from the
// terminal, while the wrapper stays out of the way. foreground reports that.
func ChildAttr() (attr *syscall.SysProcAttr, foreground bool) {
	attr = &syscall.SysProcAttr{Setpgid: true}
	if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && pgrp == unix.Getpgrp() {
		attr.Foreground = true
		attr.Ctty = 0 // with Foreground, a descriptor of leasewrap: its stdin
	}
	setParentDeathSignal(attr)
	return attr, attr.Foreground
}

// ReclaimTerminal makes the wrapper's process group the terminal's
// foreground group again, after a child that had it ended.
func ReclaimTerminal() {
	// A background group that sets the foreground group gets SIGTTOU.
	signal.Ignore(unix.SIGTTOU)
	defer signal.Reset(unix.SIGTTOU)
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
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
