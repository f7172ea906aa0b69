// Package runner runs a child command for as long as a lease holds: it
// starts the child in its own process group, forwards signals to it, stops
// it (and, on Linux, every process it started, in its group or not) before
// the lease could expire or be released, and turns its end into the shell's
// status for it. Capture, when asked, stands pipes in for the child's
// stdout and stderr, to keep the end of what it printed.
package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// The shell's statuses for a child that could not run or was killed.
const (
	StatusNotExecutable = 126 // command found but not executable
	StatusNotFound      = 127 // command not found
	// StatusSignalBase plus N is the status of a child ended by signal N.
	StatusSignalBase = 128
)

// StartError says why a command cannot run, with the shell's status for it.
type StartError struct {
	Status int
	Err    error
}

func (e *StartError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *StartError) Unwrap() error { return e.Err }

// LookPath resolves a command like a shell would, and says with a
// *StartError (127 or 126) why it cannot run, before any lease is taken for
// it.
func LookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	return "", &StartError{Status: startStatus(err), Err: fmt.Errorf("cannot run %q: %w", name, errors.Unwrap(err))}
}

// startStatus maps a failed exec to the shell's status for it.
func startStatus(err error) int {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR) {
		return StatusNotExecutable
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return StatusNotFound
	}
	return StatusNotExecutable
}

// waitStatus returns the shell's status for an ended child: its exit code,
// or 128+N after a death by signal N.
func waitStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return StatusSignalBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}
