package lease

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
