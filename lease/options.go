package lease

import (
	"time"

	"github.com/rs/zerolog"
)

// DefaultTable is the lease table's name.
const DefaultTable = "leader_lease"

// Option configures a Store.
type Option func(*config)

type config struct {
	observer Observer
	listen   bool
	table    string
	holder   string
	// ttl and timings are the timings as set; New fills in the others
	// (TimingsFor) into Timings.
	ttl     time.Duration
	timings map[Setting]time.Duration
	Timings
	clock   Clock
	holdFor time.Duration
	log     zerolog.Logger
	// slots is how many holders may have a job at once.
	slots       int
	historyKeep time.Duration
	// requireReplicated: see WithRequireReplicated.
	requireReplicated bool
}

func defaultConfig() config {
	return config{
		table:    DefaultTable,
		ttl:      DefaultTTL,
		timings:  map[Setting]time.Duration{},
		clock:    bootClock{},
		log:      zerolog.Nop(),
		observer: nopObserver{},
		listen:   true,
		slots:    1,

		historyKeep: DefaultHistoryKeep,
	}
}

// WithTable sets the lease table, optionally schema-qualified
// ("schema.table"). Each part is quoted as an identifier, never pasted.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithHolder sets this instance's holder id. The default is
// "<hostname>-<pid>-<random>", which stays unique across containers that
// share hostnames and PID 1.
func WithHolder(id string) Option { return func(c *config) { c.holder = id } }

// WithTimings sets all four timings at once (see DeriveTimings).
func WithTimings(t Timings) Option {
	return func(c *config) {
		c.ttl = t.TTL
		for _, s := range []Setting{SettingRenewInterval, SettingRetryInterval, SettingGrace} {
			c.timings[s] = s.Of(t)
		}
	}
}

// WithTTL sets the lease duration written to the database. The timings not
// set by their own options follow it, as DeriveTimings says.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithRenewInterval sets how often a holder renews.
func WithRenewInterval(d time.Duration) Option { return setTiming(SettingRenewInterval, d) }

// WithRetryInterval sets the standby poll and renewal retry period.
func WithRetryInterval(d time.Duration) Option { return setTiming(SettingRetryInterval, d) }

// WithGrace sets how long before a possible expiry work is told to stop
// (Do cancels its context then; leasewrap sends SIGTERM).
func WithGrace(d time.Duration) Option { return setTiming(SettingGrace, d) }

func setTiming(s Setting, d time.Duration) Option { return func(c *config) { c.timings[s] = d } }

// WithHoldFor keeps a released lease until at least acquisition + d, on the
// database clock, so that peers whose schedule fires a little late sit out.
func WithHoldFor(d time.Duration) Option { return func(c *config) { c.holdFor = d } }

// WithListen turns LISTEN/NOTIFY wake-ups of standbys on or off (on by
// default). Off, standbys only poll: for poolers that drop notifications.
func WithListen(on bool) Option { return func(c *config) { c.listen = on } }

// WithObserver has o told of database contact and renewals, for health
// checks and metrics.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// Observer is told what a Store's leases go through. Its methods are called
// from the renewing goroutine, the caller's and a scheduler's listener,
// possibly at once, and must not block.
type Observer interface {
	// Contacted is called whenever the database answered a statement.
	Contacted()
	// Reached is called when the database answered a keepalive on a
	// listening connection: it can be reached. Whether its statements
	// succeed is for Contacted and Failed to say.
	Reached()
	// Failed is called when a statement failed for a reason other than a
	// lease held by another instance: the database is down, read-only, or
	// refuses the table.
	Failed(err error)
	// Renewed is called after each renewal attempt with how long it took and
	// its error: nil, one wrapping ErrLost, or another failure.
	Renewed(took time.Duration, err error)
	// Lost is called when a lease ends because leadership can no longer be
	// guaranteed (Done closes with an error wrapping ErrLost).
	Lost(err error)
}

type nopObserver struct{}

func (nopObserver) Contacted()                   {}
func (nopObserver) Reached()                     {}
func (nopObserver) Failed(error)                 {}
func (nopObserver) Renewed(time.Duration, error) {}
func (nopObserver) Lost(error)                   {}

// WithLogger sets the logger for acquisitions, standby and renewals.
func WithLogger(l zerolog.Logger) Option { return func(c *config) { c.log = l } }
