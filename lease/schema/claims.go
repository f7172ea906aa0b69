package schema

import (
	"context"
	"fmt"

	"github.com/redbite/leasewrap/lease/internal/pgerr"
)

// ClaimsState is what the catalog says of the claims table.
type ClaimsState struct {
	Exists bool
	// CanWrite: INSERT and SELECT; CanPrune: DELETE.
	CanWrite, CanPrune bool
	// MissingColumns are columns an older claims table lacks.
	MissingColumns []string
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
	return cs, nil
}

// MigrateClaims creates the claims table, or checks the one there, and
// returns the change made ("" when none). Only scheduled runs and
// leasewrap migrate call it: a job without a schedule needs no claims
// table. It is safe to run from many instances at once (the same advisory
// lock as Migrate serialises the DDL). A table this role may not write
// to, or cannot create, is an error matching ErrClaimsUnavailable.
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
	return change, nil
}

// createClaims creates the claims table under the schema lock, unless
// another instance did while this one waited for it.
func (o Objects) createClaims(ctx context.Context, db DB) (string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return "", err
	}
	cs, err := o.ReadClaims(ctx, tx)
	if err != nil || cs.Exists {
		return "", err
	}
	if err := Claims.create(ctx, tx, o.Claims); err != nil {
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
