package runner

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/signals"
)

// family is every process of one run that must be stopped with it: the
// child's process group and, where leasewrap reaps its orphans (a
// subreaper on Linux, or PID 1) and has /proc to find them, every other
// process descending from leasewrap that belongs to no other run. As a
// subreaper leasewrap becomes the parent of every orphan of the run
// (`setsid cmd &`, a double fork), so nothing the child starts leaves the
// family but by leaving leasewrap's descendants altogether: started by a
// service manager (systemd-run, a daemon's own supervisor), for instance.
type family struct {
	pgid   int
	reaper *signals.Reaper // nil: the process group is all there is
	runs   *Supervisor     // the runs whose children are not this one's
}

// Supervisor runs children (Run) and knows the process group of each one
// it supervises, so that stopping what one run left behind never touches
// another run's child or what is below it. An orphan cannot be traced back
// to the run it came from, so it belongs to every run in progress; with
// one child at a time, as leasewrap runs, that is exact. A process needs
// one Supervisor for all its runs: another would not know this one's
// children and would take them for orphans of its own runs.
type Supervisor struct {
	// mu is locked before the reaper's lock, and while a child starts, so
	// no reading of the process table sees a child not yet in pgids.
	mu    sync.Mutex
	pgids map[int]bool
}

// NewSupervisor returns a Supervisor with no runs. It readies the start of
// a child meanwhile (see readyProcessStart).
func NewSupervisor() *Supervisor {
	go readyProcessStart()
	return &Supervisor{pgids: map[int]bool{}}
}

// readyProcessStart has Go check, once per process, whether this kernel's
// pidfds work, which os/exec otherwise does at the first start of a child,
// by starting and waiting for a throwaway child of its own: a millisecond
// between taking the lease and starting the command, and between a
// standby's take and its command in a handoff. Asked for here, the check
// runs while the lease is taken; a start that comes first waits for it
// (os checks once, under a sync.Once) rather than checking again.
func readyProcessStart() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Release()
	}
}

// group sends sig to the child's process group only: forwarding.
func (f *family) group(sig unix.Signal) {
	_ = signals.Group(f.pgid, sig)
}

// processTable reads the process table; a variable so that tests can
// count the reads.
var processTable = signals.Processes

// signal sends groupSig to the child's process group and otherSig to every
// other process of the family (0 sends nothing), and reports whether any
// process of the family was alive. Zombies do not count: the family's own
// are reaped first, and a zombie left to another parent cannot run. reaped,
// when not nil, is closed by the next reap of a child of the process: a
// family found alive may have ended then.
//
// A process with no child left has no descendant left (see
// signals.Reaper.Hold): then only the group is asked, with one kill(2),
// and the process table is not read. That is the common end of a run,
// and reading the table of a busy host costs milliseconds.
func (f *family) signal(groupSig, otherSig unix.Signal) (alive bool, reaped <-chan struct{}) {
	if f.reaper == nil {
		return f.groupOnly(groupSig), nil
	}
	f.runs.mu.Lock()
	defer f.runs.mu.Unlock()
	var err error
	reaped = f.reaper.Hold(func(childless bool) {
		if childless && !signals.GroupAlive(f.pgid) {
			return
		}
		var procs []signals.Process
		if procs, err = processTable(); err != nil {
			return
		}
		if groupSig != 0 {
			f.group(groupSig)
		}
		for _, p := range f.members(procs) {
			if p.Zombie {
				continue
			}
			alive = true
			if p.Pgid != f.pgid && otherSig != 0 {
				// Gone meanwhile (ESRCH) is fine; EPERM is reported by
				// the process staying alive.
				_ = unix.Kill(p.Pid, otherSig)
			}
		}
	})
	if err != nil {
		return f.groupOnly(groupSig), nil // no /proc
	}
	return alive, reaped
}

// gone reports whether the family is certainly gone without reading the
// process table: leasewrap has no child left (so no descendant) and the
// child's group is empty. reaped is as for signal. With no reaper it
// cannot tell, and says false.
func (f *family) gone() (gone bool, reaped <-chan struct{}) {
	if f.reaper == nil {
		return false, nil
	}
	reaped = f.reaper.Hold(func(childless bool) {
		gone = childless && !signals.GroupAlive(f.pgid)
	})
	return gone, reaped
}

// groupOnly is signal where the process group is all that can be found.
// Its liveness test counts zombies, which only their parent can remove.
func (f *family) groupOnly(sig unix.Signal) bool {
	if sig != 0 {
		f.group(sig)
	}
	return signals.GroupAlive(f.pgid)
}

// members picks the family out of the process table: the child's group,
// and leasewrap's descendants but other runs' children, their groups and
// everything below them. f.runs.mu must be locked.
func (f *family) members(procs []signals.Process) []signals.Process {
	other := func(pgid int) bool { return pgid != f.pgid && f.runs.pgids[pgid] }
	out := signals.Descendants(procs, os.Getpid(), func(p signals.Process) bool {
		return other(p.Pid) || other(p.Pgid)
	})
	// A member of the group found outside leasewrap's descendants (the
	// table was read while it changed) is in the family all the same.
	in := make(map[int]bool, len(out))
	for _, p := range out {
		in[p.Pid] = true
	}
	for _, p := range procs {
		if p.Pgid == f.pgid && !in[p.Pid] {
			out = append(out, p)
		}
	}
	return out
}
