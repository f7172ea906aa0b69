package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redbite/leasewrap/internal/pgerr"
)

// MaxSlots is the largest number of slots a job may have.
const MaxSlots = 1000

// ErrSlotsMismatch is matched (errors.Is) by every *SlotsError.
var ErrSlotsMismatch = errors.New("slots mismatch")

// SlotsError means the job's lease rows were taken with another number of
// slots than this Store's, or a row the job's slots would use belongs to
// another job: nothing was taken. A job's number of slots is recorded in
// its first row, and every instance of the job must use the same. It
// states the facts; what to do about them is the caller's to say, in its
// own words.
type SlotsError struct {
	Job   string
	Table string // quoted, as in SQL
	Want  int    // this Store's slots
	Found int    // the job's recorded slots; 0 when Row belongs to another job
	Row   string
}

func (e *SlotsError) Error() string {
	switch e.Found {
	case 0:
		return fmt.Sprintf("job %q with %d slots would use lease row %q, which belongs to another job", e.Job, e.Want, e.Row)
	case 1:
		return fmt.Sprintf("job %q is held by an instance with one slot, this one has %d", e.Job, e.Want)
	}
	return fmt.Sprintf("job %q runs with %d slots (recorded in its lease rows), this instance has %d", e.Job, e.Found, e.Want)
}

// Unwrap makes errors.Is(err, ErrSlotsMismatch) true.
func (e *SlotsError) Unwrap() error { return ErrSlotsMismatch }

// slotJob is the job whose slot's row is named row, as SlotRow names it:
// row less its "#N" (N > 1). Any other name is its own job's row.
func slotJob(row string) string {
	i := strings.LastIndexByte(row, '#')
	if i < 0 {
		return row
	}
	if n, err := strconv.Atoi(row[i+1:]); err != nil || n <= 1 || strconv.Itoa(n) != row[i+1:] {
		return row
	}
	return row[:i]
}

// SlotRow names the lease row of slot of job: the job itself for slot 1,
// "job#slot" for the others. It is what leasewrap_check takes as the job.
func SlotRow(job string, slot int) string {
	if slot <= 1 {
		return job
	}
	return job + "#" + strconv.Itoa(slot)
}

// slotsRow reads takeSlotsAnswer: the slot taken, with its token, or why
// none was: the slot that expires first (its holder, time left and
// state), the slots the job's first row records, a row of another job
// in the way, whether a slot looked free (racing: another instance took
// it first) and whether the job is paused.
type slotsRow struct {
	Taken           bool
	Token           int64
	Slot            int
	Holder, State   *string
	ExpiresInMicros *int64
	Recorded        *int
	ForeignName     *string
	Racing          bool
	pauseRow
}

// tryAcquireSlots is tryAcquire for a job with more than one slot. A slot
// that looked free but was taken by another instance first is retried
// with the next, so that N instances starting together take N slots.
func (s *Store) tryAcquireSlots(ctx context.Context, db querier, job string, t0 time.Duration) (*Lease, error) {
	n := s.cfg.slots
	for range n + 1 {
		var row slotsRow
		query := s.sql.takeSlots
		if h := s.hist(); h != nil {
			query = h.takeSlots
		}
		args := s.takeArgs(job)
		args["slots"] = n
		err := queryRow(ctx, db, query, args, into(&row))
		if err != nil && query != s.sql.takeSlots {
			err = s.withoutHistory(ctx, err, func() error {
				return queryRow(ctx, db, s.sql.takeSlots, args, into(&row))
			})
		}
		if err != nil {
			err = fmt.Errorf("cannot acquire a slot of lease %q: %w", job, pgerr.Classify(err))
			s.cfg.observer.Failed(err)
			return nil, err
		}
		s.cfg.observer.Contacted()
		switch {
		case row.Taken:
			return s.confirmed(ctx, db, newSlotLease(s, job, row.Slot, row.Token, t0+s.cfg.TTL))
		case row.Paused:
			return nil, row.markPaused(&HeldError{Job: job, Slots: n})
		case row.ForeignName != nil:
			return nil, &SlotsError{Job: job, Table: s.table.Sanitize(), Want: n, Row: *row.ForeignName}
		case !row.Racing && row.Recorded != nil && *row.Recorded != n:
			return nil, &SlotsError{Job: job, Table: s.table.Sanitize(), Want: n, Found: *row.Recorded}
		case !row.Racing && row.ExpiresInMicros != nil && *row.ExpiresInMicros > 0:
			return nil, &HeldError{Job: job, Holder: *row.Holder, Token: row.Token, State: State(*row.State), Slot: row.Slot, Slots: n,
				ExpiresIn: time.Duration(*row.ExpiresInMicros) * time.Microsecond}
		}
		// Another instance took the slot this one picked: look again.
	}
	// Every slot was taken under this instance's nose: busy, so a standby
	// waits its retry interval rather than an expiry it does not know.
	return nil, &HeldError{Job: job, Slots: n, State: StateHeld, ExpiresIn: s.cfg.RetryInterval}
}
