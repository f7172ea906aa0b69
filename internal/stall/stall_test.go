package stall

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// More busy threads than cores wait for one in turn: the kernel counts it,
// and Waited reads it.
func TestWaitedCountsRunQueueWaits(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat on this kernel:", err)
	}
	before := Waited(os.Getpid())
	var wg sync.WaitGroup
	for range 3 * runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own, for the kernel to queue
			for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
			}
		}()
	}
	wg.Wait()
	if waited := Waited(os.Getpid()) - before; waited <= 0 {
		t.Errorf("threads outnumbering the cores waited %s for one", waited)
	}
}

// A process that is gone waited for nothing, and a window over it adds
// only this process's stalls, never a negative share.
func TestWaitedOfAGoneProcess(t *testing.T) {
	const gone = 1 << 30 // above any pid_max
	if w := Waited(gone); w != 0 {
		t.Errorf("a gone process waited %s", w)
	}
	if s := Open(gone).StalledIn(time.Second); s < 0 {
		t.Errorf("window over a gone process stalled %s", s)
	}
}

// A process's share of a window is capped at the span: its threads' waits
// add up, but it cannot have been kept waiting longer than the span.
func TestStalledInCapsAProcessAtTheSpan(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat on this kernel:", err)
	}
	w := Open(os.Getpid())
	w.waited[os.Getpid()] -= time.Hour // as if its threads had waited an hour
	if s, span := w.StalledIn(time.Millisecond), time.Millisecond; s > span+Since(w.start) {
		t.Errorf("stalled %s in a span of %s", s, span)
	}
}
