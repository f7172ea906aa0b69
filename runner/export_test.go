package runner

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redbite/leasewrap/signals"
)

// CountProcessTableReads counts the reads of the process table until the
// end of t, which must not run in parallel with other tests.
func CountProcessTableReads(t *testing.T) (reads func() int) {
	var n atomic.Int64
	processTable = func() ([]signals.Process, error) {
		n.Add(1)
		return signals.Processes()
	}
	t.Cleanup(func() { processTable = signals.Processes })
	return func() int { return int(n.Load()) }
}

// FreezePollClock stops the polls of a stop until the end of t, which must
// not run in parallel with other tests: a stop then checks again only when
// a child is reaped. The channel receives each time a stop waits, having
// found processes of its run alive.
func FreezePollClock(t *testing.T) (waits <-chan struct{}) {
	w := make(chan struct{}, 16)
	pollClock = func() (<-chan time.Time, func()) { return nil, func() {} }
	stopWaits = func() {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { pollClock, stopWaits = defaultPollClock, nil })
	return w
}
