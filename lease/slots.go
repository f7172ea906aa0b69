package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redbite/leasewrap/lease/internal/pgerr"
)

// MaxSlots is the largest --slots a job may have.
const MaxSlots = 1000

// ErrSlotsMismatch is matched (errors.Is) by every *SlotsError.
var ErrSlotsMismatch = errors.New("slots mismatch")

// SlotsError means the job's lease rows were taken with another number of
// slots than this Store's, or a row the job's slots would use belongs to
// another job: nothing was taken. A job's number of slots is recorded in
// its first row, and every instance of the job must use the same.
type SlotsError struct {
	Job   string
	Table string // quoted, as in SQL
	Want  int    // this Store's slots
	Found int    // the job's recorded slots; 0 when Row belongs to another job
	Row   string
}

func (e *SlotsError) Error() string {
	switch {
	case e.Found == 0:
		return fmt.Sprintf("job %q with %d slots would use lease row %q, which belongs to another job: rename one of the two jobs", e.Job, e.Want, e.Row)
	case e.Found == 1:
		return fmt.Sprintf("job %q is held by an instance with one slot, this one has %d: start every instance of it with the same --slots "+
			"(a job with one slot may move to more while no instance holds it)", e.Job, e.Want)
	}
	return fmt.Sprintf("job %q runs with %d slots (recorded in its lease rows), this instance has %d: start every instance of it with --slots %d; "+
		"to change the number, stop them all, then UPDATE %s SET slots = NULL WHERE job_name = '%s'",
		e.Job, e.Found, e.Want, e.Found, e.Table, strings.ReplaceAll(e.Job, "'", "''"))
}

// Unwrap makes errors.Is(err, ErrSlotsMismatch) true.
func (e *SlotsError) Unwrap() error { return ErrSlotsMismatch }

// WithSlots lets up to n holders have the job at once (1, the default, is
// a plain lease). Each slot is its own lease row with its own fencing
// token, renewal and release: slot 1 is the row named after the job, slot
// k > 1 the row named "job#k". Every instance of a job must use the same n.
func WithSlots(n int) Option { return func(c *config) { c.slots = n } }

// SlotRow names the lease row of slot of job: the job itself for slot 1,
// "job#slot" for the others. It is what leasewrap_check takes as the job.
func SlotRow(job string, slot int) string {
	if slot <= 1 {
		return job
	}
	return job + "#" + strconv.Itoa(slot)
}

// acquireSlotsSQL takes the lowest free slot of a job with $4 slots: $1 job,
// $2 holder, $3 TTL. It takes nothing when the job's first row records
// another number of slots (unless that is one, and the row is free: no
// other row can be live then), or when a row it would use is another
// job's (a job named "x#2"), and then reports which. Instances of the job
// all try its lowest free slot first, so two with different numbers
// meet on the same row, where only one can win. Like the single-slot take,
// it is conditional on the token it read, and with a history table it
// closes the run of a holder that never released as lost. When no slot
// is free it reports the live slot that expires first.
func acquireSlotsSQL(table, history string) string {
	lost := ""
	if history != "" {
		lost = `,
lost AS (
  INSERT INTO ` + history + ` (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome)
  SELECT $1::text, p.slot, p.holder, p.fencing_token, ` + nextAttempt(history, "$1::text", "p.fencing_token") + `,
    p.last_started_at, greatest(p.expires_at, p.last_started_at), '` + OutcomeLost + `'
  FROM pick p WHERE EXISTS (SELECT FROM taken) AND p.present AND p.last_started_at IS NOT NULL AND p.last_finished_at IS NULL)`
	}
	return `WITH want AS (
  SELECT g AS slot, CASE WHEN g = 1 THEN $1::text ELSE $1::text || '#' || g END AS name
  FROM generate_series(1, $4::integer) AS g),
cur AS (
  SELECT w.slot, w.name, l.job_name IS NOT NULL AS present,
    l.job_name IS NOT NULL AND coalesce(l.slot, 1) <> w.slot AS foreign_row,
    l.fencing_token, l.holder, l.expires_at, l.released_at, l.last_started_at, l.last_finished_at,
    CASE WHEN w.slot = 1 AND l.job_name IS NOT NULL THEN coalesce(l.slots, 1) END AS recorded
  FROM want w LEFT JOIN ` + table + ` AS l ON l.job_name = w.name),
verdict AS (
  SELECT (SELECT recorded FROM cur WHERE slot = 1) AS recorded,
    (SELECT NOT present OR expires_at <= now() FROM cur WHERE slot = 1) AS first_free,
    (SELECT min(name) FROM cur WHERE foreign_row) AS foreign_name),
pick AS (
  SELECT c.* FROM cur c, verdict v
  WHERE (NOT c.present OR c.expires_at <= now()) AND v.foreign_name IS NULL
    AND (coalesce(v.recorded, $4) = $4 OR v.recorded = 1 AND v.first_free)
  ORDER BY c.slot LIMIT 1),
taken AS (
INSERT INTO ` + table + ` AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder, slot, slots)
SELECT name, $2::text, now() + $3::bigint * interval '1 microsecond', ` + clockToken + `, now(), now(), now(), $2, slot, $4
FROM pick
ON CONFLICT (job_name) DO UPDATE SET
  ` + takeSet + `,
  slot = excluded.slot,
  slots = excluded.slots
WHERE l.expires_at <= now() AND l.fencing_token = (SELECT fencing_token FROM pick)
RETURNING fencing_token, slot)` + lost + `
SELECT true, t.fencing_token, t.slot, NULL::text, NULL::bigint, NULL::text, NULL::integer, NULL::text, false
FROM taken t
UNION ALL
(SELECT false, coalesce(c.fencing_token, 0), c.slot, c.holder, ` + micros + `, ` + heldState + `,
  v.recorded, v.foreign_name, EXISTS (SELECT FROM pick)
FROM cur c, verdict v WHERE NOT EXISTS (SELECT FROM taken)
ORDER BY (c.present AND c.expires_at > now()) DESC, c.expires_at LIMIT 1)`
}

// tryAcquireSlots is tryAcquire for a job with more than one slot. A slot
// that looked free but was taken by another instance first is retried
// with the next, so that N instances starting together take N slots.
func (s *Store) tryAcquireSlots(ctx context.Context, db DB, job string, t0 time.Duration) (*Lease, error) {
	n := s.cfg.slots
	for range n + 1 {
		var (
			taken, racing bool
			token         int64
			slot          int
			holder, state *string
			expiresMicros *int64
			recorded      *int
			foreign       *string
		)
		dest := []any{&taken, &token, &slot, &holder, &expiresMicros, &state, &recorded, &foreign, &racing}
		query := s.acquireSlotsSQL()
		err := db.QueryRow(ctx, query, job, s.cfg.holder, s.cfg.TTL.Microseconds(), n).Scan(dest...)
		if err != nil && query != s.slotsSQL {
			err = s.withoutHistory(ctx, err, func() error {
				return db.QueryRow(ctx, s.slotsSQL, job, s.cfg.holder, s.cfg.TTL.Microseconds(), n).Scan(dest...)
			})
		}
		if err != nil {
			err = fmt.Errorf("cannot acquire a slot of lease %q: %w", job, pgerr.Classify(err))
			s.cfg.observer.Failed(err)
			return nil, err
		}
		s.cfg.observer.Contacted()
		switch {
		case taken:
			return s.confirmed(ctx, db, newSlotLease(s, job, slot, token, t0+s.cfg.TTL))
		case foreign != nil:
			return nil, &SlotsError{Job: job, Table: s.table.Sanitize(), Want: n, Row: *foreign}
		case !racing && recorded != nil && *recorded != n:
			return nil, &SlotsError{Job: job, Table: s.table.Sanitize(), Want: n, Found: *recorded}
		case !racing && expiresMicros != nil && *expiresMicros > 0:
			return nil, &HeldError{Job: job, Holder: *holder, Token: token, State: *state, Slot: slot, Slots: n,
				ExpiresIn: time.Duration(*expiresMicros) * time.Microsecond}
		}
		// Another instance took the slot this one picked: look again.
	}
	// Every slot was taken under this instance's nose: busy, so a standby
	// waits its retry interval rather than an expiry it does not know.
	return nil, &HeldError{Job: job, Slots: n, State: StateHeld, ExpiresIn: s.cfg.RetryInterval}
}

// acquireSlotsSQL is the multi-slot take for the schema found.
func (s *Store) acquireSlotsSQL() string {
	if h := s.hist(); h != nil {
		return h.acquireSlots
	}
	return s.slotsSQL
}
