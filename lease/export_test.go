package lease

import "github.com/redbite/leasewrap/schema"

// Exports for the tests of package lease_test only.

// WithClock replaces the local clock that deadlines are kept on, so that a
// test drives a lease's renewals and expiry without waiting.
func WithClock(c Clock) Option { return func(cfg *config) { cfg.clock = c } }

// Decided reports whether the time is accounted for: run here, or claimed.
func (c Claim) Decided() bool { return c.Lease != nil || c.Outcome != "" }

// PollBehind is how many retry intervals a polling standby behind the
// head of the queue (and behind the next in line, for one that may
// listen) waits between looks.
const PollBehind = pollBehind

// HotFunctions are the signatures of the lease table's own functions for
// --table table, in the order look, renewal, queue entry.
func HotFunctions(table string) []string {
	t, err := ParseTable(table)
	if err != nil {
		panic(err)
	}
	out := make([]string, len(hotFunctions))
	for i, f := range hotFunctions {
		_, fn := f.define(schema.For(t))
		out[i] = fn.Signature
	}
	return out
}
