package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redbite/leasewrap/internal/pgerr"
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
	// asked the holder to hand the lease back (leasewrap release --id). Its
	// Planned method says so to code that cannot import this package.
	ErrReleasedByOperator error = operatorRelease{}
	// ErrTakeInDoubt means a take's answer came too late to be used (the
	// take ran past its budget, and the process had stalled) and the
	// lease it may have taken is live under this holder's own id: it is
	// not used, and expires by itself.
	ErrTakeInDoubt = errors.New("a take whose answer came too late (this process stalled, or the database was slow) holds it; it is not used and expires by itself")
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
	ErrReadOnly = pgerr.ErrReadOnly
	// ErrPermission is returned (wrapped, with the server's own error, which
	// names the object) when the role lacks a privilege: a configuration
	// problem, not an outage.
	ErrPermission = pgerr.ErrPermission
)

type operatorRelease struct{}

func (operatorRelease) Error() string { return "an operator released the lease (lease lost)" }
func (operatorRelease) Unwrap() error { return ErrLost }

// Planned reports that the lease ended by plan, not by a fault.
func (operatorRelease) Planned() bool { return true }

// HeldError is returned by TryAcquire when another holder's lease is live.
type HeldError struct {
	Job    string
	Holder string
	// ExpiresIn is measured by the database clock when the row was read.
	ExpiresIn time.Duration
	Token     int64
	// State is StateHeld, StateKept (its command finished; hold-for keeps
	// the lease), StateReleasing (an operator asked it to stop) or
	// StateReleased (released without hold-for just as this take began:
	// the take's own clock still saw it live).
	State State
	// Slot is the slot whose holder is named, of Slots (both 0 for a job
	// with one slot). With several slots every one is held, and this one
	// expires first.
	Slot, Slots int
	// Paused is set, with State StatePaused, when an operator paused the
	// job: ExpiresIn is then how long until it runs out (at most a minute,
	// when to look again).
	Paused *Pause
}

func (e *HeldError) Error() string {
	if e.Paused != nil {
		return fmt.Sprintf("lease %q not taken: the job is paused by %q", e.Job, e.Paused.By)
	}
	if e.Slots > 1 {
		return fmt.Sprintf("all %d slots of lease %q held; slot %d by %q for another %s", e.Slots, e.Job, e.Slot, e.Holder, e.ExpiresIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("lease %q held by %q for another %s", e.Job, e.Holder, e.ExpiresIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// NoAnswerError is a statement the database did not answer within the
// time it was given: a server that hangs, or a network that drops what
// is sent, said as such rather than as "context deadline exceeded".
type NoAnswerError struct {
	Within time.Duration // how long the statement was given
	Err    error         // the timeout, as the driver reported it
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("the database did not answer within %s", e.Within.Round(time.Millisecond))
}

// Unwrap returns the driver's error, so that errors.Is(err,
// context.DeadlineExceeded) still holds.
func (e *NoAnswerError) Unwrap() error { return e.Err }

// noAnswer is err as a *NoAnswerError when it is the timeout of ctx, a
// statement's context that was given within, or of a new connection's
// connect_timeout; err otherwise.
func noAnswer(ctx context.Context, err error, within time.Duration) error {
	if !timedOut(err) {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &NoAnswerError{Within: within, Err: err}
	}
	// A new connection that its connect_timeout ended, a moment before
	// the statement's own deadline.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil && ce.Config.ConnectTimeout > 0 {
		return &NoAnswerError{Within: min(within, ce.Config.ConnectTimeout), Err: err}
	}
	return err
}

// connectionLost reports whether err says the connection broke rather than
// that the server refused the statement: a network or protocol error, a
// connection exception (class 08), or the server ending the session
// (57P01 admin_shutdown, after a restart).
func connectionLost(err error) bool {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	code := pgerr.SQLState(err)
	return code == "" || strings.HasPrefix(code, "08") || code == pgerr.CodeAdminShutdown
}

// needsCatalog reports whether a failed acquire may be the table's fault
// (missing, older, or not a lease table), so that the catalog should be read
// to create, upgrade or refuse it.
func needsCatalog(err error) bool {
	code := pgerr.SQLState(err)
	return strings.HasPrefix(code, pgerr.ClassAccessRule) || code == pgerr.CodeNotNull || code == pgerr.CodeNotInPrerequisiteState
}

// retryable reports whether a failed statement may succeed later: a
// read-only server (a failover may be under way), or anything but a server
// error that says the request itself is wrong (privileges, missing objects,
// bad names), which waiting will not mend.
func retryable(err error) bool {
	if errors.Is(err, ErrNotLeaseTable) || errors.Is(err, ErrFencingUnavailable) || errors.Is(err, ErrSlotsMismatch) ||
		errors.Is(err, ErrStandbysHidden) {
		return false
	}
	code := pgerr.SQLState(err)
	if code == "" || code == pgerr.CodeReadOnly {
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

// timedOut reports whether err is a timeout that a stall of this process
// alone can cause: the context's deadline, or a socket deadline that
// passed meanwhile. A connect resumed after a stop can fail with either,
// depending on which timer the runtime sees first ("dial tcp …: i/o
// timeout" is os.ErrDeadlineExceeded, which is not context's).
func timedOut(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		errors.As(err, &netErr) && netErr.Timeout()
}

// Unreachable reports whether err means that the database could not be
// reached, which may mend by itself once the server or the network is back:
// a refused or reset connection, a name that does not resolve yet, a dial
// or connect timeout, a connection closed during its start-up, or a server
// that turns sessions away for now (starting up or shutting down, 57P03;
// ending sessions after an operator's or a crash's restart, 57P01 and
// 57P02; no connection slot free, 53300). It is false for nil, for a
// cancelled context, for an invalid connection string (ErrBadDatabaseURL)
// and for every other error of the server, such as a failed
// authentication (28P01, 28000) or a database that does not exist
// (3D000): waiting does not mend those. An error that joins several
// attempts (one per host) is unreachable only if none of them failed for
// good.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrBadDatabaseURL) {
		return false
	}
	refusals := serverErrors(err)
	for _, e := range refusals {
		switch e.Code {
		case pgerr.CodeCannotConnectNow, pgerr.CodeAdminShutdown, pgerr.CodeCrashShutdown, pgerr.CodeTooManyConnections:
		default:
			return false
		}
	}
	// A network error (a refused dial, a reset, a timeout, a name that
	// does not resolve: net.Error, which syscall.Errno is too), or the
	// server closing the connection before it answered.
	var netErr net.Error
	return len(refusals) > 0 || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// ReadOnly reports whether err means that the server takes no writes: a
// hot standby (in a failover, until one is promoted), or a session that is
// read-only by default.
func ReadOnly(err error) bool { return pgerr.ReadOnly(err) }

// Awaitable reports whether waiting may mend err: the database could not
// be reached (Unreachable), or took no writes (ReadOnly). A --wait standby
// and a scheduler stand by for the database through such a failure.
func Awaitable(err error) bool { return Unreachable(err) || ReadOnly(err) }

// serverErrors lists the server's errors in err's tree: every joined
// attempt's, where errors.As would find the first alone.
func serverErrors(err error) []*pgconn.PgError {
	switch e := err.(type) { //nolint:errorlint // errors.As would stop at the first
	case *pgconn.PgError:
		return []*pgconn.PgError{e}
	case interface{ Unwrap() error }:
		return serverErrors(e.Unwrap())
	case interface{ Unwrap() []error }:
		var all []*pgconn.PgError
		for _, inner := range e.Unwrap() {
			all = append(all, serverErrors(inner)...)
		}
		return all
	}
	return nil
}
