package runner_test

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/runner"
)

// pipeSink is a Sink whose file is a pipe's write end, and that pipe's
// read end.
func pipeSink(t *testing.T, name string) (*runner.Sink, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return runner.NewSink(name, w, zerolog.Nop()), r
}

// closeWithin runs c.Close(wait), failing the test if it has not returned
// long after wait.
func closeWithin(t *testing.T, c *runner.Capture, wait time.Duration) bool {
	t.Helper()
	done := make(chan bool, 1)
	go func() { done <- c.Close(wait) }()
	select {
	case drained := <-done:
		return drained
	case <-time.After(wait + 30*time.Second):
		t.Fatal("Capture.Close did not return")
		return false
	}
}

// Each stream goes to its own Sink and, all of it, to the tail; Close
// returns once the copies have read the streams to their end.
func TestCaptureCopiesEachStreamToItsSinkAndTheTail(t *testing.T) {
	t.Parallel()
	out, outR := pipeSink(t, "stdout")
	errSink, errR := pipeSink(t, "stderr")
	tail := &lwtest.SyncBuffer{}
	c, err := runner.StartCapture(tail, out, errSink)
	if err != nil {
		t.Fatal(err)
	}
	// As a command would, in turn: a stream's copy reads it before the
	// next write, since the test reads it from the Sink first.
	read := func(r *os.File, want string) {
		t.Helper()
		buf := make([]byte, len(want))
		if _, err := r.Read(buf); err != nil || string(buf) != want {
			t.Fatalf("sink got %q, %v; want %q", buf, err, want)
		}
	}
	_, _ = c.File(out).WriteString("one\n")
	read(outR, "one\n")
	_, _ = c.File(errSink).WriteString("two\n")
	read(errR, "two\n")
	_, _ = c.File(out).WriteString("three")
	read(outR, "three")
	if !closeWithin(t, c, 10*time.Second) {
		t.Error("Close reports a copy still going with every write end closed")
	}
	if got := tail.String(); got != "one\ntwo\nthree" {
		t.Errorf("tail %q, want both streams in the order read", got)
	}
}

// A Sink that fails (leasewrap's own stdout, its reader gone) does not stop
// the copy: the command's writes still complete, far beyond what a pipe
// holds, the tail gets them all, and the Sink says why it stopped.
func TestCaptureKeepsDrainingPastAFailedSink(t *testing.T) {
	t.Parallel()
	s, r := pipeSink(t, "stdout")
	r.Close()
	tail := &lwtest.SyncBuffer{}
	c, err := runner.StartCapture(tail, s)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	written := make(chan error, 1)
	go func() {
		_, err := c.File(s).Write(big)
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a 1 MiB write still blocked after 60s: the copy stopped with its Sink")
	}
	if !closeWithin(t, c, 10*time.Second) {
		t.Error("Close reports a copy still going")
	}
	if tail.String() != string(big) {
		t.Errorf("tail kept %d bytes, want all %d", len(tail.String()), len(big))
	}
	if !errors.Is(s.Err(), syscall.EPIPE) {
		t.Errorf("Sink.Err() = %v, want EPIPE", s.Err())
	}
}

// A process that outlives the run and still holds the pipe (here a
// duplicate of the command's end) cannot hold up the end of the run:
// Close gives up after its wait, and that holder's next write fails
// instead of blocking.
func TestCaptureCloseIsBoundedByAHolderOfThePipe(t *testing.T) {
	t.Parallel()
	s, _ := pipeSink(t, "stdout")
	c, err := runner.StartCapture(&lwtest.SyncBuffer{}, s)
	if err != nil {
		t.Fatal(err)
	}
	held, err := unix.Dup(int(c.File(s).Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(held)
	if closeWithin(t, c, 100*time.Millisecond) {
		t.Error("Close reports the copy done while the pipe is still held")
	}
	if _, err := unix.Write(held, []byte("late")); !errors.Is(err, unix.EPIPE) {
		t.Errorf("a write to the held pipe after Close: %v, want EPIPE", err)
	}
}
