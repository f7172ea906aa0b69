package lease

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Defaults for a Store's timings and table. They follow the rule that the
// renewal interval plus the grace a holder gets to stop its work must fit
// well inside the TTL.
const (
	// DefaultTable is the lease table's name.
	DefaultTable = "leader_lease"
	// DefaultTTL is how long a lease lasts after each acquisition or renewal.
	DefaultTTL = 45 * time.Second
	// DefaultRenewInterval is how often a holder renews its lease.
	DefaultRenewInterval = 15 * time.Second
	// DefaultRetryInterval is how often a standby polls a held lease and a
	// holder retries a failed renewal.
	DefaultRetryInterval = 2 * time.Second
	// DefaultGrace is the time work gets to stop before its lease could
	// expire.
	DefaultGrace = 10 * time.Second
)

// Option configures a Store.
type Option func(*config)

type config struct {
	observer      Observer
	listen        bool
	table         string
	holder        string
	ttl           time.Duration
	renewInterval time.Duration
	retryInterval time.Duration
	grace         time.Duration
	holdFor       time.Duration
	log           zerolog.Logger
}

func defaultConfig() config {
	return config{
		table:         DefaultTable,
		ttl:           DefaultTTL,
		renewInterval: DefaultRenewInterval,
		retryInterval: DefaultRetryInterval,
		grace:         DefaultGrace,
		log:           zerolog.Nop(),
		observer:      nopObserver{},
		listen:        true,
	}
}

// WithTable sets the lease table, optionally schema-qualified
// ("schema.table"). Each part is quoted as an identifier, never pasted.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithHolder sets this instance's holder id. The default is
// "<hostname>-<pid>-<random>", which stays unique across containers that
// share hostnames and PID 1.
func WithHolder(id string) Option { return func(c *config) { c.holder = id } }

// WithTTL sets the lease duration written to the database.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithRenewInterval sets how often a holder renews.
func WithRenewInterval(d time.Duration) Option { return func(c *config) { c.renewInterval = d } }

// WithRetryInterval sets the standby poll and renewal retry period.
func WithRetryInterval(d time.Duration) Option { return func(c *config) { c.retryInterval = d } }

// WithGrace sets how long before a possible expiry work is told to stop
// (Do cancels its context then; leasewrap sends SIGTERM).
func WithGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

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
// from the renewing goroutine and must not block.
type Observer interface {
	// Contacted is called whenever the database answered a statement.
	Contacted()
	// Renewed is called after each renewal attempt with how long it took and
	// its error: nil, one wrapping ErrLost, or another failure.
	Renewed(took time.Duration, err error)
	// Lost is called when a lease ends because leadership can no longer be
	// guaranteed (Done closes with an error wrapping ErrLost).
	Lost(err error)
}

type nopObserver struct{}

func (nopObserver) Contacted()                   {}
func (nopObserver) Renewed(time.Duration, error) {}
func (nopObserver) Lost(error)                   {}

// WithLogger sets the logger for acquisitions, standby and renewals.
func WithLogger(l zerolog.Logger) Option { return func(c *config) { c.log = l } }

// SafetyMargin is the part of the TTL kept back for the cost of stopping
// work and for the rate difference between the local and the database clock:
// work must be gone this long before the local deadline.
func SafetyMargin(ttl time.Duration) time.Duration { return ttl / 20 }

// TimingError reports timings that cannot keep a lease safe. Field names the
// offending setting as the Go option would ("TTL", "RenewInterval", ...).
type TimingError struct {
	Field string
	Value time.Duration
	Msg   string
}

func (e *TimingError) Error() string {
	return fmt.Sprintf("invalid %s %s: %s", e.Field, e.Value, e.Msg)
}

// CheckTimings reports whether ttl, renewal interval, retry interval and
// grace can be safe together: all positive, and renewal plus grace plus the
// safety margin inside the TTL so that at least one renewal happens before
// work has to stop.
func CheckTimings(ttl, renewInterval, retryInterval, grace time.Duration) error {
	for _, d := range []struct {
		field string
		value time.Duration
	}{{"TTL", ttl}, {"RenewInterval", renewInterval}, {"RetryInterval", retryInterval}, {"Grace", grace}} {
		if d.value <= 0 {
			return &TimingError{Field: d.field, Value: d.value, Msg: "must be positive"}
		}
	}
	if ttl%time.Microsecond != 0 {
		return &TimingError{Field: "TTL", Value: ttl, Msg: "must be a whole number of microseconds"}
	}
	if renewInterval+grace+SafetyMargin(ttl) >= ttl {
		return &TimingError{Field: "TTL", Value: ttl, Msg: fmt.Sprintf(
			"must be longer than renew interval (%s) + grace (%s) + 5%% of itself; for example %s",
			renewInterval, grace, SuggestTTL(renewInterval, grace))}
	}
	// A failed renewal must be retried at least once before work has to stop.
	if room := ttl - renewInterval - grace - SafetyMargin(ttl); retryInterval >= room {
		return &TimingError{Field: "RetryInterval", Value: retryInterval, Msg: fmt.Sprintf(
			"must be shorter than %s (TTL less renew interval, grace and 5%% of the TTL), so that a failed renewal is retried before work must stop; for example %s",
			room, (room / 4).Round(time.Millisecond))}
	}
	return nil
}

// SuggestTTL proposes a TTL for the given renewal interval and grace that
// also leaves room for one failed renewal.
func SuggestTTL(renewInterval, grace time.Duration) time.Duration {
	return ((2*renewInterval + grace) * 21 / 20).Round(time.Second) + time.Second
}
