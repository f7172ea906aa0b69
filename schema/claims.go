package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
)

// RequestedOutcome is the outcome of a claim that asks the job's
// schedulers for a run now. Such claims are few and the others many (one
// per scheduled time, kept for weeks), so the claims table has a partial
// index of them alone: a scheduler that polls for requests every retry
// interval reads that index, not every claim of its job.
const RequestedOutcome = "requested"

// requestsSuffix ends the name of the claims table's index of requested
// runs: "<table>_schedule_requested".
const requestsSuffix = "_requested"

// ErrRequestsIndexUnavailable is matched (errors.Is) by the error that says
// the claims table lacks its index of requested runs (it was created by an
// earlier version) and this role may not create it. Requested runs are
// still found, by reading every claim of the job.
var ErrRequestsIndexUnavailable = errors.New("index of requested runs unavailable")

// ClaimsState is what the catalog says of the claims table.
type ClaimsState struct {
	Exists bool
	// CanWrite: INSERT and SELECT; CanPrune: DELETE.
	CanWrite, CanPrune bool
	// MissingColumns are columns an older claims table lacks.
	MissingColumns []string
	// HasRequestsIndex: the index of requested runs is there; Owns: this
	// role may create it (only the table's owner may).
	HasRequestsIndex, Owns bool
}

// ReadClaims looks the claims table up and checks that it is one
// leasewrap can use; if not, it returns an *Error with Claims set.
func (o Objects) ReadClaims(ctx context.Context, q Queryer) (ClaimsState, error) {
	cat, err := o.read(ctx, q, Claims, o.Claims)
	if err != nil {
		return ClaimsState{}, err
	}
	cs := ClaimsState{Exists: cat.exists && cat.kind != "", CanWrite: cat.canWrite, CanPrune: cat.canDelete}
	if !cs.Exists {
		return cs, nil
	}
	missing, _, mismatch := Claims.check(cat)
	if mismatch != nil {
		mismatch.Table, mismatch.Claims = o.Claims, true
		return ClaimsState{}, mismatch
	}
	cs.MissingColumns = missing
	err = q.QueryRow(ctx, requestsIndexSQL,
		pgx.StrictNamedArgs{"index": o.RequestsIndex(), "claims": o.Claims}).
		Scan(&cs.HasRequestsIndex, &cs.Owns)
	if err != nil {
		return ClaimsState{}, fmt.Errorf("cannot look up %s: %w", o.RequestsIndex(), pgerr.Classify(err))
	}
	return cs, nil
}

// requestsIndexSQL reads whether the index of requested runs @index is
// there, and whether this role may create it: whether it has the rights
// of the owner of the claims table @claims (both quoted).
const requestsIndexSQL = `SELECT pg_catalog.to_regclass(@index) IS NOT NULL, coalesce((SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE')
  FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass(@claims)), false)`

// MigrateClaims creates the claims table, or checks the one there, and
// returns the change made ("" when none). Only scheduled runs and
// leasewrap migrate call it: a job without a schedule needs no claims
// table. It is safe to run from many instances at once (the same advisory
// lock as Migrate serialises the DDL). A table this role may not write
// to, or cannot create, is an error matching ErrClaimsUnavailable. A table
// of an earlier version gets its index of requested runs; when this role
// may not create it, the error matches ErrRequestsIndexUnavailable and
// the table is usable as it is.
func (o Objects) MigrateClaims(ctx context.Context, db DB) (string, error) {
	cs, err := o.ReadClaims(ctx, db)
	if err != nil {
		return "", err
	}
	change := ""
	if !cs.Exists {
		if change, err = o.createClaims(ctx, db); err != nil {
			return "", err
		}
		if cs, err = o.ReadClaims(ctx, db); err != nil {
			return "", err
		}
	}
	if !cs.CanWrite || !cs.CanPrune {
		return change, fmt.Errorf("%w: this role may not SELECT, INSERT and DELETE on %s (GRANT SELECT, INSERT, DELETE ON %s)",
			ErrClaimsUnavailable, o.Claims, o.Claims)
	}
	switch {
	case cs.HasRequestsIndex:
		return change, nil
	case !cs.Owns:
		// Told without a DDL that would fail: the usual least-privileged
		// role of a wrapper.
		return change, o.requestsIndexUnavailable()
	}
	return o.addRequestsIndex(ctx, db)
}

// addRequestsIndex gives a claims table of an earlier version its index of
// requested runs, under the schema lock, unless another instance did while
// this one waited for it. Only the table's owner may: for another role it
// changes nothing and returns an error matching
// ErrRequestsIndexUnavailable (so does MigrateClaims, before the lock).
func (o Objects) addRequestsIndex(ctx context.Context, db DB) (string, error) {
	tx, err := o.lockSchema(ctx, db)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	cs, err := o.ReadClaims(ctx, tx)
	if err != nil || cs.HasRequestsIndex {
		return "", err
	}
	if !cs.Owns {
		return "", o.requestsIndexUnavailable()
	}
	err = o.createRequestsIndex(ctx, tx)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("cannot create the index of requested runs on claims table %s: %w", o.Claims, pgerr.Classify(err))
	}
	return fmt.Sprintf("created index %s of requested runs on claims table %s", o.RequestsIndex(), o.Claims), nil
}

func (o Objects) requestsIndexUnavailable() error {
	return fmt.Errorf("%w: claims table %s lacks it, and only its owner may create it; "+
		"until leasewrap migrate runs as its owner, looking for requested runs reads every claim of the job",
		ErrRequestsIndexUnavailable, o.Claims)
}

// createClaimsTable creates the claims table with its index of requested
// runs.
func (o Objects) createClaimsTable(ctx context.Context, tx pgx.Tx) error {
	if err := Claims.create(ctx, tx, o.Claims); err != nil {
		return err
	}
	return o.createRequestsIndex(ctx, tx)
}

func (o Objects) createRequestsIndex(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, o.createRequestsIndexSQL())
	return err
}

// createRequestsIndexSQL creates the claims table's index of requested
// runs, in the table's schema.
func (o Objects) createRequestsIndexSQL() string {
	return "CREATE INDEX IF NOT EXISTS " + pgx.Identifier{o.requests[len(o.requests)-1]}.Sanitize() +
		" ON " + o.Claims + " (job_name, scheduled_at) WHERE outcome = '" + RequestedOutcome + "'"
}

// createClaims creates the claims table under the schema lock, unless
// another instance did while this one waited for it.
func (o Objects) createClaims(ctx context.Context, db DB) (string, error) {
	tx, err := o.lockSchema(ctx, db)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	cs, err := o.ReadClaims(ctx, tx)
	if err != nil || cs.Exists {
		return "", err
	}
	if err := o.createClaimsTable(ctx, tx); err != nil {
		if pgerr.SQLState(err) == pgerr.CodeNoPrivilege {
			return "", fmt.Errorf("%w: this role may not create %s (run leasewrap migrate as a role that may create tables in its schema)",
				ErrClaimsUnavailable, o.Claims)
		}
		return "", fmt.Errorf("cannot create claims table %s: %w", o.Claims, pgerr.Classify(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("cannot create claims table %s: %w", o.Claims, pgerr.Classify(err))
	}
	return "created claims table " + o.Claims, nil
}
