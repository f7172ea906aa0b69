package signals

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// Reaper owns waiting for every child of the process. As PID 1 (a container
// entrypoint) or as a child subreaper (see Subreaper) the wrapper inherits
// orphans and must reap them, or they stay zombies for good. Reaping with
// wait4(-1) in the same process as exec.Cmd.Wait would race it for the main
// child's status (whichever waits first gets it, and the other sees
// ECHILD or a status that is not its child's), so with a Reaper nothing
// else may wait: it hands each started child's status to its channel and
// discards the orphans'. A process has one Reaper (ProcessReaper).
type Reaper struct {
	mu      sync.Mutex
	waiting map[int]chan unix.WaitStatus
	sigchld chan os.Signal
	// childless is set when the last reap found the process without any
	// child, running or not.
	childless bool
	// reaped is closed, and replaced, whenever a child is reaped.
	reaped chan struct{}
}

// NeedReaper reports whether this process must reap orphans because it is
// PID 1. A subreaper must too; runner.Run takes care of both.
func NeedReaper() bool { return os.Getpid() == 1 }

var theReaper = sync.OnceValue(func() *Reaper {
	r := &Reaper{waiting: map[int]chan unix.WaitStatus{}, sigchld: make(chan os.Signal, 1), reaped: make(chan struct{})}
	signal.Notify(r.sigchld, unix.SIGCHLD)
	go r.loop()
	return r
})

// ProcessReaper returns the process's Reaper, and starts it reaping on
// every SIGCHLD the first time. There is only one: two would race each
// other's wait4(-1) just as a Reaper and exec.Cmd.Wait would.
func ProcessReaper() *Reaper { return theReaper() }

var subreaper = sync.OnceValue(becomeSubreaper)

// Subreaper makes the process a child subreaper (Linux's
// PR_SET_CHILD_SUBREAPER) the first time it is called, and returns nil if
// the process is one. From then on every orphan among the process's
// descendants becomes its child, so all waiting for children must go
// through ProcessReaper. Elsewhere than on Linux it returns
// errors.ErrUnsupported.
func Subreaper() error { return subreaper() }

// Start starts cmd and returns the channel its wait status arrives on. The
// child is registered before any SIGCHLD can be handled, so its status
// cannot be taken for an orphan's.
func (r *Reaper) Start(cmd *exec.Cmd) (<-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	// The status comes from wait4 here: cmd.Wait must not be called.
	r.waiting[cmd.Process.Pid] = ch
	return ch, nil
}

// Hold reaps every child that has exited, runs fn while no child can be
// reaped, and reaps again. So the process's own zombies are gone when fn
// starts, those fn sees (children that exited meanwhile) are gone when Hold
// returns, and the pid of any child fn finds alive cannot be reused by
// another process before fn returns: fn may signal children by pid.
//
// fn is told whether the process has no child left at all. As a subreaper
// (or PID 1) that proves it has no descendant either: an orphan becomes the
// child of its nearest living subreaper ancestor, so every living
// descendant has a chain of living parents up to the process.
//
// The channel Hold returns is closed by the first reap after fn ran
// (already, if Hold's own last reap collected a child), so a caller that
// found a child alive can wait for its end instead of polling for it.
func (r *Reaper) Hold(fn func(childless bool)) (reaped <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reapLocked()
	fn(r.childless)
	reaped = r.reaped
	r.reapLocked()
	return reaped
}

func (r *Reaper) loop() {
	for range r.sigchld {
		r.mu.Lock()
		r.reapLocked()
		r.mu.Unlock()
	}
}

// reapLocked collects every child that has exited.
func (r *Reaper) reapLocked() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			r.childless = errors.Is(err, unix.ECHILD)
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			ch <- ws
			delete(r.waiting, pid)
		}
		close(r.reaped)
		r.reaped = make(chan struct{})
	}
}
