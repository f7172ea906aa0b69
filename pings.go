package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/ping"
)

// pingCloseTimeout bounds how long leasewrap waits at exit for pings still
// on their way; the lease is released before.
const pingCloseTimeout = 2 * time.Second

// runPings tells a monitor about one run of the command (--ping-url). A nil
// *runPings does nothing, so a run without a monitor needs no branches.
type runPings struct {
	pinger *ping.Pinger
	tail   *ping.Tail // the end of the command's stderr, with --ping-output
	log    zerolog.Logger

	mu      sync.Mutex
	refused error // leasewrap's stderr's first failure: the copy to it stopped
}

// newRunPings starts pinging for this run, or returns nil without
// --ping-url. Only the instance that holds the lease calls it: a skip pings
// nothing.
func newRunPings(o runOptions, log zerolog.Logger) *runPings {
	if o.pingURL == "" {
		return nil
	}
	p, err := ping.New(o.pingURL, ping.WithLogger(log), ping.WithProtocol(o.pingProtocol))
	if err != nil { // checked when parsing: cannot happen
		log.Warn().Err(err).Msg("not pinging the monitor")
		return nil
	}
	rp := &runPings{pinger: p, log: log}
	if o.pingOutput {
		rp.tail = ping.NewTail(ping.DefaultTailSize)
	}
	p.Start()
	return rp
}

// stderr is where the command's stderr goes: leasewrap's own, or with
// --ping-output a pipe copied to it and to the tail. The returned func
// closes leasewrap's end once the run is over, and waits (briefly) for the
// copy to reach the end of what the command wrote.
func (rp *runPings) stderr() (*os.File, func()) {
	if rp == nil || rp.tail == nil {
		return os.Stderr, func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return os.Stderr, func() {}
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		rp.copyStderr(os.Stderr, r)
	}()
	return w, func() {
		w.Close()
		select {
		case <-copied:
		case <-time.After(time.Second): // a descendant that escaped still holds it
		}
		r.Close()
	}
}

// copyStderr copies the command's stderr from r to out and to the tail,
// until r ends. The tail takes everything. out takes it until its first
// failure (a reader that went away, a full disk), and from then on its share
// is dropped: a copy that stopped reading would leave the command blocked in
// write for ever while its lease is renewed.
func (rp *runPings) copyStderr(out io.Writer, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = rp.tail.Write(buf[:n])
			if rp.stderrRefused() == nil {
				if _, werr := out.Write(buf[:n]); werr != nil {
					rp.refuse(werr)
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (rp *runPings) stderrRefused() error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.refused
}

// refuse stops the copy to leasewrap's stderr, and says so once. The log goes
// to that same stderr and may well be lost with it: the final ping says it
// too (see finish).
func (rp *runPings) refuse(err error) {
	rp.mu.Lock()
	first := rp.refused == nil
	if first {
		rp.refused = err
	}
	rp.mu.Unlock()
	if first {
		rp.log.Warn().Err(err).Msg("cannot copy the command's stderr to leasewrap's: the rest goes to the final ping only")
	}
}

// finish sends the final ping with leasewrap's exit status, and the tail of
// stderr when asked for.
func (rp *runPings) finish(code int) {
	if rp == nil {
		return
	}
	var body []byte
	if rp.tail != nil {
		body = rp.tail.Bytes()
		if err := rp.stderrRefused(); err != nil {
			body = fmt.Appendf(body, "\nleasewrap: the command's stderr could not be copied to leasewrap's own (%v); from then on it went to this ping only\n", err)
		}
	}
	rp.pinger.Finish(code, body)
}

// close waits a bounded time for pings still on their way.
func (rp *runPings) close() {
	if rp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingCloseTimeout)
	defer cancel()
	_ = rp.pinger.Close(ctx)
}
