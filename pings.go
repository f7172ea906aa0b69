package main

import (
	"context"
	"io"
	"os"
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
	rp := &runPings{pinger: p}
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
		_, _ = io.Copy(io.MultiWriter(os.Stderr, rp.tail), r)
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

// finish sends the final ping with leasewrap's exit status, and the tail of
// stderr when asked for.
func (rp *runPings) finish(code int) {
	if rp == nil {
		return
	}
	var body []byte
	if rp.tail != nil {
		body = rp.tail.Bytes()
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
