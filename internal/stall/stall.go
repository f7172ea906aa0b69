// Package stall measures how long the machine kept this test process
// waiting for a core, so that tests' bounds on wall time can allow for it.
package stall

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A bound on wall time, such as "a standby takes over within TTL plus one
// retry interval", is the product's promise on a machine that lets its
// processes run. On a loaded machine every process waits for a core, and
// a wrapper's timers fire late by as much as the test's own do. So bounds
// add what Since measured in this process over their window:
// lateness the machine caused stretches them, and a wrapper that is late
// on a machine that is not still fails them.

// stallTick is how often the meter asks to wake.
const stallTick = 5 * time.Millisecond

// stall is one wake-up later than asked: when, and by how much.
type stall struct {
	at   time.Time
	late time.Duration
}

type stallMeter struct {
	mu     sync.Mutex
	stalls []stall
}

var meter = sync.OnceValue(func() *stallMeter {
	m := &stallMeter{}
	go m.run()
	return m
})

// Watch starts measuring how late this process's timers fire, for Since:
// stalls before the first call are not seen. lwtest.Main calls it.
func Watch() { meter() }

func (m *stallMeter) run() {
	for {
		asked := time.Now()
		time.Sleep(stallTick)
		now := time.Now()
		// A millisecond late is the timer's resolution, not a stall.
		if late := now.Sub(asked) - stallTick; late > time.Millisecond {
			m.mu.Lock()
			m.stalls = append(m.stalls, stall{at: now, late: late})
			// A bound's window is seconds long; an hour of history is plenty.
			for len(m.stalls) > 0 && now.Sub(m.stalls[0].at) > time.Hour {
				m.stalls = m.stalls[1:]
			}
			m.mu.Unlock()
		}
	}
}

// Since is how much later than asked this process's timers fired,
// in sum, since t: the time the machine kept it waiting for a core.
func Since(t time.Time) time.Duration { return between(t, time.Now()) }

// between is Since for the stalls that ended after from and by to.
func between(from, to time.Time) time.Duration {
	m := meter()
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum time.Duration
	for i := len(m.stalls) - 1; i >= 0 && m.stalls[i].at.After(from); i-- {
		if !m.stalls[i].at.After(to) {
			sum += m.stalls[i].late
		}
	}
	return sum
}

// Within reports whether less than d has passed since start, once the
// stalls since start are taken out: the deadline of a bound.
func Within(start time.Time, d time.Duration) bool {
	return time.Since(start) <= d+Since(start)
}

// Another process's timers fire late by more than this process's do when
// it needs more of a core per wake-up (a race-enabled wrapper querying the
// database, where the meter above only sleeps): the kernel's accounting
// of its run-queue waits measures that directly, where this process's
// stalls would understate it.

// Waited is how long the threads of process pid have waited, in all, on a
// run queue for a core (the second field of /proc/<pid>/task/*/schedstat).
// Subtract an earlier reading for a window; a process that is gone, or a
// kernel without schedstat, reads as zero.
func Waited(pid int) time.Duration {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	var sum time.Duration
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// A Window is the stalls of this process (Since) and of some others
// (Waited) from when it was opened: the slack a bound on events that
// involve those processes may add.
type Window struct {
	start  time.Time
	waited map[int]time.Duration
}

// Open starts a window at now over this process and the processes pids.
func Open(pids ...int) *Window {
	w := &Window{start: time.Now(), waited: map[int]time.Duration{}}
	for _, pid := range pids {
		w.waited[pid] = Waited(pid)
	}
	return w
}

// Start is when the window opened.
func (w *Window) Start() time.Time { return w.start }

// Stalled is StalledIn for the window so far.
func (w *Window) Stalled() time.Duration { return w.StalledIn(time.Since(w.start)) }

// StalledIn is the stalls in the first span of the window: this process's
// (Since) plus the most any of its other processes waited for a core. The
// kernel counts those waits only up to now, and a process's threads may
// wait at once, their waits adding up: a process's share is capped at the
// span, which it cannot have been kept waiting beyond. A thread that ended
// takes its waits with it, so a share is never below zero.
func (w *Window) StalledIn(span time.Duration) time.Duration {
	var most time.Duration
	for pid, before := range w.waited {
		most = max(most, Waited(pid)-before)
	}
	return between(w.start, w.start.Add(span)) + min(most, span)
}

// Late reports whether took, a span from the window's start, broke bound
// once the stalls in that span are added to it, and what they were.
func (w *Window) Late(took, bound time.Duration) (late bool, stalled time.Duration) {
	stalled = w.StalledIn(took)
	return took > bound+stalled, stalled
}

// Within reports whether less than d has passed since the window opened,
// once its stalls are taken out: the deadline of a wait.
func (w *Window) Within(d time.Duration) bool {
	late, _ := w.Late(time.Since(w.start), d)
	return !late
}
