package wrap

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/ping"
	"github.com/redbite/leasewrap/runner"
)

// runOutput captures the command's output during one run: with
// --keep-output its stdout and stderr, each attempt's last bytes kept in
// its history row; with --ping-output alone its stderr, whose last bytes
// go with the final ping. Both read the same tail, which spans the run's
// attempts. Streams not captured stay leasewrap's own files, passed
// through untouched. A nil *runOutput captures nothing.
//
// When leasewrap's stdout and stderr are one file (`>>log 2>&1`, a
// terminal), the command gets one pipe for both, as it got that one file
// twice before: its two streams then stay in the exact order it wrote
// them, in that file and in the tail. Two pipes are read apart, and
// writes close together on both could swap.
type runOutput struct {
	tail *ping.Tail
	keep int // bytes of each attempt kept in the history; 0: none
	// stdout (nil when not captured; stderr itself when they are one
	// file) and stderr are where the captured streams go.
	stdout, stderr *runner.Sink
	log            zerolog.Logger
}

// newRunOutput returns the capture the settings ask for, or nil.
func newRunOutput(o runOptions, log zerolog.Logger) *runOutput {
	pingOutput := o.pingURL != "" && o.pingOutput
	if o.keepOutput == 0 && !pingOutput {
		return nil
	}
	size := o.keepOutput
	if pingOutput {
		size = max(size, ping.DefaultTailSize)
	}
	ro := &runOutput{tail: ping.NewTail(size), keep: o.keepOutput, log: log}
	ro.stderr = runner.NewSink("stderr", os.Stderr, log)
	if o.keepOutput > 0 && sameFile(os.Stdout, os.Stderr) {
		ro.stderr = runner.NewSink("stdout and stderr", os.Stdout, log)
		ro.stdout = ro.stderr
	} else if o.keepOutput > 0 {
		ro.stdout = runner.NewSink("stdout", os.Stdout, log)
	}
	return ro
}

// sameFile reports whether a and b are the same file.
func sameFile(a, b *os.File) bool {
	ai, aerr := a.Stat()
	bi, berr := b.Stat()
	return aerr == nil && berr == nil && os.SameFile(ai, bi)
}

// sinks are the streams captured, each once.
func (ro *runOutput) sinks() []*runner.Sink {
	if ro.stdout == nil || ro.stdout == ro.stderr {
		return []*runner.Sink{ro.stderr}
	}
	return []*runner.Sink{ro.stdout, ro.stderr}
}

// attempt gives one attempt of the command its stdout and stderr. end,
// called once the attempt is over, closes the pipes and returns the output
// the attempt keeps for the history: nil when it keeps none.
func (ro *runOutput) attempt() (stdout, stderr *os.File, end func() []byte) {
	stdout, stderr = os.Stdout, os.Stderr
	if ro == nil {
		return stdout, stderr, func() []byte { return nil }
	}
	mark := ro.tail.Written()
	c, err := runner.StartCapture(ro.tail, ro.sinks()...)
	if err != nil {
		ro.log.Warn().Err(err).Msg("cannot capture the command's output: it goes to leasewrap's own and is not kept")
		return stdout, stderr, func() []byte { return nil }
	}
	if ro.stdout != nil {
		stdout = c.File(ro.stdout)
	}
	stderr = c.File(ro.stderr)
	return stdout, stderr, func() []byte {
		if !c.Close(runner.DrainTimeout) {
			ro.log.Warn().Stringer("waited", runner.DrainTimeout).
				Msg("a process that outlived the command still holds its output: the output shown and kept may lack its end")
		}
		if ro.keep == 0 {
			return nil
		}
		return ro.tail.Since(mark, ro.keep)
	}
}

// pingBody is what the final ping carries with --ping-output: the last
// bytes of the run's output, and a word on each stream that could not be
// shown on leasewrap's own.
func (ro *runOutput) pingBody() []byte {
	body := ro.tail.Last(ping.DefaultTailSize)
	for _, s := range ro.sinks() {
		if err := s.Err(); err != nil {
			body = fmt.Appendf(body, "\nleasewrap: the command's %s could not be copied to leasewrap's own (%v); from then on it was only kept, not shown\n",
				s.Name(), err)
		}
	}
	return body
}
