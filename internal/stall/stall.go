// Package stall measures how long the machine kept this test process
// waiting for a core, so that tests' bounds on wall time can allow for it.
package stall

import (
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
func Since(t time.Time) time.Duration {
	m := meter()
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum time.Duration
	for i := len(m.stalls) - 1; i >= 0 && m.stalls[i].at.After(t); i-- {
		sum += m.stalls[i].late
	}
	return sum
}

// Within reports whether less than d has passed since start, once the
// stalls since start are taken out: the deadline of a bound.
func Within(start time.Time, d time.Duration) bool {
	return time.Since(start) <= d+Since(start)
}
