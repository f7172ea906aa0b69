package runner

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DrainTimeout bounds how long Capture.Close waits, once a run is over,
// for the copies to reach the end of what the command wrote. Only a
// process that outlived the run and still holds the pipe (one that is not
// leasewrap's descendant, or anywhere but on Linux) or a reader of
// leasewrap's own output that stopped reading keeps a copy going that
// long.
const DrainTimeout = time.Second

// Sink is where one of the command's streams went before it was captured:
// leasewrap's own stdout or stderr. It takes the command's output until
// its first failure (a reader that went away, a full disk) and from then
// on drops it, saying so once: a copy that stopped reading would leave the
// command blocked in write for ever while its lease is renewed. One Sink
// serves every attempt of a run, so the failure is said once.
type Sink struct {
	name string
	file *os.File
	log  zerolog.Logger

	mu  sync.Mutex
	err error
}

// NewSink returns the Sink for file, called name ("stdout", "stderr",
// "stdout and stderr") in the warning its failure logs.
func NewSink(name string, file *os.File, log zerolog.Logger) *Sink {
	return &Sink{name: name, file: file, log: log}
}

// Name returns the stream's name.
func (s *Sink) Name() string { return s.name }

// Err returns the failure that stopped the copy to the Sink, or nil.
func (s *Sink) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// write writes p to the file unless an earlier write failed.
func (s *Sink) write(p []byte) {
	if s.Err() != nil {
		return
	}
	if _, err := s.file.Write(p); err != nil {
		s.refuse(err)
	}
}

func (s *Sink) refuse(err error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = err
	}
	s.mu.Unlock()
	if first {
		s.log.Warn().Err(err).Str("stream", s.name).
			Msgf("cannot copy the command's %s to leasewrap's: the rest is only kept, not shown", s.name)
	}
}

// Capture is the pipes that stand in for some of a command's streams
// during one attempt: what the command writes to each is copied to the
// tail, then to the stream's Sink. Each stream has its own pipe and copy,
// so the two streams reach leasewrap's stdout and stderr apart, as they
// would without a pipe, and the tail has them in the order leasewrap read
// them: each stream's bytes in order, the two interleaved as each copy
// read its stream. A copy keeps reading whatever becomes of its Sink, and
// the tail only takes a memory copy, so the command's writes wait on
// nothing but (as without the pipe) a reader of leasewrap's output that is
// slow to read.
type Capture struct {
	files   map[*Sink]*os.File // the write end the command gets, by stream
	readers []*os.File
	copies  sync.WaitGroup
}

// StartCapture makes a pipe for each of sinks and starts copying from it
// into tail (whose Write must not fail or block for long) and the Sink.
// On an error no pipe is left open.
func StartCapture(tail io.Writer, sinks ...*Sink) (*Capture, error) {
	c := &Capture{files: map[*Sink]*os.File{}}
	for _, s := range sinks {
		r, w, err := os.Pipe()
		if err != nil {
			c.closeWriters()
			c.closeReaders()
			return nil, err
		}
		c.files[s] = w
		c.readers = append(c.readers, r)
		c.copies.Add(1)
		go func() {
			defer c.copies.Done()
			copyOut(tail, s, r)
		}()
	}
	return c, nil
}

// File returns the file to give the command in place of s's: the write
// end of its pipe.
func (c *Capture) File(s *Sink) *os.File { return c.files[s] }

// Close closes leasewrap's write ends, once the command has been started
// and the run is over, and waits up to wait for the copies to read what
// is left in the pipes, then closes the read ends. A process still
// holding a pipe then gets EPIPE (or SIGPIPE) on its next write rather
// than keeping the run from ending. It reports whether every copy read
// its stream to the end.
func (c *Capture) Close(wait time.Duration) bool {
	c.closeWriters()
	copied := make(chan struct{})
	go func() {
		c.copies.Wait()
		close(copied)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	drained := true
	select {
	case <-copied:
	case <-t.C:
		drained = false
	}
	c.closeReaders()
	return drained
}

func (c *Capture) closeWriters() {
	for _, w := range c.files {
		_ = w.Close()
	}
}

func (c *Capture) closeReaders() {
	for _, r := range c.readers {
		_ = r.Close()
	}
}

// copyBufferSize is how much a copy reads at once: more than a pipe's
// default capacity (64 KiB on Linux), so that one read empties it.
const copyBufferSize = 128 << 10

// copyOut copies r into tail and then s until r ends or is closed. The
// tail gets each read first: by the time the bytes show on leasewrap's
// output, they are kept.
func copyOut(tail io.Writer, s *Sink, r *os.File) {
	buf := make([]byte, copyBufferSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = tail.Write(buf[:n])
			s.write(buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.log.Debug().Err(err).Str("stream", s.name).Msg("stopped copying the command's output")
			}
			return
		}
	}
}
