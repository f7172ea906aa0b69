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
// entrypoint) the wrapper inherits every orphan of the container and must
// reap them, or they stay zombies for good. Reaping with wait4(-1) in the
// same process as exec.Cmd.Wait would race it for the main child's status,
// so with a Reaper nothing else may wait: it hands each started child's
// status to its channel and discards the orphans'.
type Reaper struct {
	mu      sync.Mutex
	waiting map[int]chan unix.WaitStatus
	sigchld chan os.Signal
}

// NeedReaper reports whether this process must reap orphans: it is PID 1.
func NeedReaper() bool { return os.Getpid() == 1 }

// NewReaper starts reaping on every SIGCHLD.
func NewReaper() *Reaper {
	r := &Reaper{waiting: map[int]chan unix.WaitStatus{}, sigchld: make(chan os.Signal, 1)}
	signal.Notify(r.sigchld, unix.SIGCHLD)
	go r.loop()
	return r
}

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

func (r *Reaper) loop() {
	for range r.sigchld {
		r.reap()
	}
}

// reap collects every child that has exited.
func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			ch <- ws
			delete(r.waiting, pid)
		}
	}
}
