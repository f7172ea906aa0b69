package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Errors a Store and its leases return; match them with errors.Is. Errors
// from the database are wrapped, never replaced, so a caller can still reach
// the *pgconn.PgError and its SQLSTATE.
var (
	// ErrLost means the lease is no longer this holder's: it expired, was
	// taken over, or was released by an operator.
	ErrLost = errors.New("lease lost")
	// ErrRowRegressed (which also matches ErrLost) means a renewal found the
	// lease row older than what this holder had committed to it: the row is
	// gone, or carries an older token.
	ErrRowRegressed = fmt.Errorf("the lease row lost a committed write: asynchronous failover, restore or manual delete? (%w)", ErrLost)
	// ErrReleasedByOperator (which also matches ErrLost) means an operator
	// asked the holder to hand the lease back (leasewrap release --id).
	ErrReleasedByOperator = fmt.Errorf("an operator released the lease (%w)", ErrLost)
	// ErrHeld means another holder has a live lease; the error is a *HeldError.
	ErrHeld = errors.New("lease held by another instance")
	// ErrReleased is the Err of a lease that was handed back by Release.
	ErrReleased = errors.New("lease released")
	// ErrNoJob means the table has no row for the job (or there is no table yet).
	ErrNoJob = errors.New("no such job")
	// ErrBadDatabaseURL is returned (wrapped) for a connection string that
	// cannot be parsed. The message never repeats the password.
	ErrBadDatabaseURL = errors.New("invalid database URL")
	// ErrReadOnly is returned (wrapped, with the server's own error) when the
	// server refuses writes: a hot standby, or a session that is read-only by
	// default.
	ErrReadOnly = errors.New("the database is read-only (a standby, or default_transaction_read_only is on): point the connection string at the primary, for example with target_session_attrs=read-write")
)

// HeldError is returned by TryAcquire when another holder's lease is live.
type HeldError struct {
	Job    string
	Holder string
	// ExpiresIn is measured by the database clock when the row was read.
	ExpiresIn time.Duration
	Token     int64
	// State is StateHeld, StateKept (its command finished; hold-for keeps
	// the lease) or StateReleasing (an operator asked it to stop).
	State string
	// Slot is the slot whose holder is named, of Slots (both 0 for a job
	// with one slot). With several slots every one is held, and this one
	// expires first.
	Slot, Slots int
}

func (e *HeldError) Error() string {
	if e.Slots > 1 {
		return fmt.Sprintf("all %d slots of lease %q held; slot %d by %q for another %s", e.Slots, e.Job, e.Slot, e.Holder, e.ExpiresIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("lease %q held by %q for another %s", e.Job, e.Holder, e.ExpiresIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// SQLSTATEs leasewrap treats specially.
const (
	codeReadOnly       = "25006" // read_only_sql_transaction
	codeUndefinedTable = "42P01"
)

// sqlState returns the SQLSTATE of the server error in err's chain, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// classify adds ErrReadOnly to the server's read-only refusal, and to pgx's
// when target_session_attrs=read-write found no primary, keeping the original
// error in the chain.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrReadOnly) {
		return err
	}
	if sqlState(err) == codeReadOnly || errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return err
}

// retryable reports whether a failed statement may succeed later: a
// read-only server (a failover may be under way), or anything but a server
// error that says the request itself is wrong (privileges, missing objects,
// bad names), which waiting will not mend.
func retryable(err error) bool {
	if errors.Is(err, ErrNotLeaseTable) || errors.Is(err, ErrFencingUnavailable) || errors.Is(err, ErrSlotsMismatch) {
		return false
	}
	code := sqlState(err)
	if code == "" || code == codeReadOnly {
		return true
	}
	switch code[:2] {
	case "08", "53", "57", "58", "40", "55":
		// connection, resources, operator intervention, system, rollback,
		// object not in prerequisite state.
		return true
	}
	return false
}
