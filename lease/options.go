package lease

import (
	"time"

	"github.com/rs/zerolog"
)

// DefaultTable is the lease table's name.
const DefaultTable = "leader_lease"

// Option configures a Store. Every option of the package is in this file.
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
	// priority orders this instance in its job's queue of standbys.
	priority int
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

// WithLogger sets the logger for acquisitions, standby and renewals.
func WithLogger(l zerolog.Logger) Option { return func(c *config) { c.log = l } }

// WithSlots lets up to n holders have the job at once (1, the default, is
// a plain lease). Each slot is its own lease row with its own fencing
// token, renewal and release: slot 1 is the row named after the job, slot
// k > 1 the row named "job#k". Every instance of a job must use the same n.
func WithSlots(n int) Option { return func(c *config) { c.slots = n } }

// WithHistoryKeep sets how long finished runs stay in the history table
// (default DefaultHistoryKeep); 0 keeps them for ever. Each release deletes
// at most a small batch of older runs.
func WithHistoryKeep(d time.Duration) Option { return func(c *config) { c.historyKeep = d } }

// WithRequireReplicated makes a take or renewal count, for the lease's
// local deadline and for Acquire and TryAcquire to return it, only once
// every standby streaming from the primary has replayed it, so that a
// failover to any of them cannot lose it, even with asynchronous
// replication. The deadline still runs from before the statement was sent,
// and the wait is bounded by it: a renewal the standbys do not replay in
// time is a failed renewal. With no standby streaming, a take fails at
// once (and writes nothing). The role needs pg_monitor, or to be a
// superuser. Off by default, when takes and renewals cost no extra round
// trip.
func WithRequireReplicated(on bool) Option { return func(c *config) { c.requireReplicated = on } }

// WithPriority sets this instance's place among its job's standbys: a
// release hands the lease to the standby with the highest priority, and
// among equals to the one that has waited longest (default 0).
func WithPriority(n int) Option { return func(c *config) { c.priority = n } }
