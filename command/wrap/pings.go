package wrap

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/ping"
)

// PingCloseTimeout bounds how long leasewrap waits at exit for pings still
// on their way; the lease is released before.
const PingCloseTimeout = 2 * time.Second

// runPings tells a monitor about one run of the command (--ping-url). A nil
// *runPings does nothing, so a run without a monitor needs no branches.
type runPings struct {
	pinger *ping.Pinger
	output *runOutput // with --ping-output, whose tail the final ping carries
}

// newRunPings starts pinging for this run, or returns nil without
// --ping-url. Only the instance that holds the lease calls it: a skip pings
// nothing. output is the run's captured output, which holds the tail
// --ping-output sends.
func newRunPings(o runOptions, output *runOutput, log zerolog.Logger) *runPings {
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
		rp.output = output
	}
	p.Start()
	return rp
}

// finish sends the final ping with leasewrap's exit status, and the tail of
// the output when asked for.
func (rp *runPings) finish(code int) {
	if rp == nil {
		return
	}
	var body []byte
	if rp.output != nil {
		body = rp.output.pingBody()
	}
	rp.pinger.Finish(code, body)
}

// close waits a bounded time for pings still on their way.
func (rp *runPings) close() {
	if rp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), PingCloseTimeout)
	defer cancel()
	_ = rp.pinger.Close(ctx)
}
