package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/lease/internal/pgerr"
)

// Lease states, as HeldError and inspect.Reader.Status report them (see
// schema.HeldState and schema.RowState). The first three are live: no other
// holder can take the lease.
const (
	// StateHeld: a holder has the lease and renews it.
	StateHeld = "held"
	// StateReleasing: an operator asked the holder to hand the lease back;
	// it stops its command at its next renewal.
	StateReleasing = "releasing"
	// StateKept: the holder's command finished, and --hold-for keeps the
	// lease until it expires.
	StateKept = "kept"
	// StateReleased: handed back, free to take.
	StateReleased = "released"
	// StateExpired: not renewed in time, free to take.
	StateExpired = "expired"
)

// ReleaseHeld ends the live lease in row (a job, or a slot's row: see
// SlotRow) for an operator: holder's only when holder is set, whoever's when
// it is empty, and only under token when token is not 0 (the lease the
// operator looked at, not one taken since). Without force it asks the holder
// to give the lease back: the lease is marked released, the holder stops its
// work at its next renewal and frees the lease itself (or the lease expires,
// if the holder is gone). With force the lease is free at once: only for a
// holder known to be dead, since a live one runs on until its next renewal
// and grace. The row and its fencing token stay. It returns the holder and
// token it released, or ErrNoJob if there was no live lease to release.
func (s *Store) ReleaseHeld(ctx context.Context, row, holder string, token int64, force bool) (string, int64, error) {
	if row == "" {
		return "", 0, fmt.Errorf("invalid lease row: empty")
	}
	var holderArg *string
	if holder != "" {
		holderArg = &holder
	}
	var tokenArg *int64
	if token != 0 {
		tokenArg = &token
	}
	var (
		was      string
		released int64
	)
	err := s.db.QueryRow(ctx, s.sql.releaseAny, row, holderArg, force, s.channel, tokenArg).Scan(&was, &released, nil)
	switch {
	case errors.Is(err, pgx.ErrNoRows), pgerr.SQLState(err) == pgerr.CodeUndefinedTable:
		return "", 0, fmt.Errorf("no live lease on %q to release: %w", row, ErrNoJob)
	case err != nil:
		return "", 0, fmt.Errorf("cannot release lease %q: %w", row, pgerr.Classify(err))
	}
	return was, released, nil
}
