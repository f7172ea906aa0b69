// Package runner runs a child command for as long as a lease holds: it
// starts the child in its own process group, forwards signals to it, stops
// it (and, on Linux, every process it started, in its group or not) before
// the lease could expire or be released, and turns its end into an exit
// status.
package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit statuses of leasewrap besides the child's own, after the shell's and
// sysexits.h's conventions.
const (
	ExitUsage         = 64  // EX_USAGE: bad command line or configuration
	ExitUnavailable   = 69  // EX_UNAVAILABLE: lease store unreachable or unusable before the child started
	ExitLeaseLost     = 75  // EX_TEMPFAIL: the lease was lost while the child ran; the child was stopped
	ExitWaitTimeout   = 124 // --wait-timeout passed without becoming leader
	ExitNotExecutable = 126 // command found but not executable
	ExitNotFound      = 127 // command not found
	// ExitSignalBase plus N is the status of a child ended by signal N.
	ExitSignalBase = 128
)

// ExitError carries leasewrap's exit status out of a command's action, so
// that deferred releases run before the process exits. Err, when set, is
// the one line to tell the user; a nil Err means everything was logged.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

// LookPath resolves a command like a shell would, and says with 127 or 126
// why it cannot run, before any lease is taken for it.
func LookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	code := ExitNotFound
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR) {
		code = ExitNotExecutable
	}
	return "", &ExitError{Code: code, Err: fmt.Errorf("cannot run %q: %w", name, errors.Unwrap(err))}
}

// startStatus maps a failed exec to the shell's status for it.
func startStatus(err error) int {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return ExitNotFound
	}
	return ExitNotExecutable
}

// waitStatus returns the shell's status for an ended child: its exit code,
// or 128+N after a death by signal N.
func waitStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return ExitSignalBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}
