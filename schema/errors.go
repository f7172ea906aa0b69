package schema

import (
	"errors"
	"fmt"
)

// ErrNotLeaseTable is matched (errors.Is) by every *Error about the lease
// table.
var ErrNotLeaseTable = errors.New("not a leasewrap table")

// ErrFencingUnavailable is matched (errors.Is) by the error Migrate returns
// when the table is complete but the role may not create leasewrap_check
// in the table's schema. Nothing was altered.
var ErrFencingUnavailable = errors.New("fencing function unavailable")

// ErrHistoryUnavailable is matched (errors.Is) by the errors that say the
// run history cannot be used: Migrate's when the history table is missing
// and this role may not create it, or is not one leasewrap can write to
// (an *Error with History set), and the readers' when it cannot be read.
var ErrHistoryUnavailable = errors.New("run history unavailable")

// ErrClaimsUnavailable is matched (errors.Is) by the errors that say the
// claims table cannot be used: it is not one leasewrap can use, or it is
// missing and this role may not create it. Scheduled runs need it.
var ErrClaimsUnavailable = errors.New("claims table unavailable")

// Error means the table named for the leases (or their history) exists but
// is not one leasewrap can use or upgrade. Nothing was altered. It names
// the first mismatch found: Column is the column at fault ("" when the
// fault is not one column's, such as the primary key), Found what the
// catalog says and Want what would be valid.
type Error struct {
	Table  string // quoted, as in SQL
	Column string
	Found  string
	Want   string
	// History is set when Table is the run history table, not the lease
	// table: runs are not recorded, and the leases work on.
	History bool
	// Claims is set when Table is the claims table: jobs with a schedule
	// cannot run; the others work on.
	Claims bool
}

func (e *Error) Error() string {
	what := e.Found + ", want " + e.Want
	if e.Column != "" {
		what = "column " + e.Column + " is " + what
	}
	if e.History {
		return "history table " + e.Table + " is not a leasewrap history table: " + what
	}
	if e.Claims {
		return "claims table " + e.Table + " is not a leasewrap claims table: " + what
	}
	return "lease table " + e.Table + " is not a leasewrap table: " + what
}

// Unwrap makes errors.Is(err, ErrNotLeaseTable) true, or for the history
// table errors.Is(err, ErrHistoryUnavailable), for the claims table
// errors.Is(err, ErrClaimsUnavailable).
func (e *Error) Unwrap() error {
	switch {
	case e.History:
		return ErrHistoryUnavailable
	case e.Claims:
		return ErrClaimsUnavailable
	}
	return ErrNotLeaseTable
}

// FencingError is ErrFencingUnavailable with the schema at fault.
type FencingError struct {
	Function string // quoted
	Schema   string
}

func (e *FencingError) Error() string {
	return fmt.Sprintf("cannot create fencing function %s: needs CREATE on schema %s (run leasewrap migrate once as a role that has it)",
		e.Function, e.Schema)
}

// Unwrap makes errors.Is(err, ErrFencingUnavailable) true.
func (e *FencingError) Unwrap() error { return ErrFencingUnavailable }

// HistoryError is ErrHistoryUnavailable for a history table this role may
// not create.
type HistoryError struct {
	Table  string // quoted
	Schema string
}

func (e *HistoryError) Error() string {
	return fmt.Sprintf("cannot create history table %s: needs CREATE on schema %s (run leasewrap migrate once as a role that has it)",
		e.Table, e.Schema)
}

// Unwrap makes errors.Is(err, ErrHistoryUnavailable) true.
func (e *HistoryError) Unwrap() error { return ErrHistoryUnavailable }
