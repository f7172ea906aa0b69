package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/schema"
)

// State is how a lease stands, as HeldError and inspect.Reader.Status
// report it. Its words are declared, and decided, in package schema (in SQL
// by schema.HeldState and schema.RowState, in Go by schema.StateOf).
type State = schema.LeaseState

// Lease states (see schema.LeaseState). The first three are live: no other
// holder can take the lease.
const (
	StateHeld      = schema.StateHeld
	StateReleasing = schema.StateReleasing
	StateKept      = schema.StateKept
	StateReleased  = schema.StateReleased
	StateExpired   = schema.StateExpired
	StatePaused    = schema.StatePaused
)

// StrongerState is the state a job whose rows (slots) are in states a and
// b shows: a job is held while any of its slots is (see
// schema.StrongerState).
func StrongerState(a, b State) State { return schema.StrongerState(a, b) }

// ReleaseHeld ends the live lease in row (a job, or a slot's row: see
// SlotRow) for an operator: holder's only when holder is set, whoever's when
// it is empty, and only under token when token is not 0 (the lease the
// operator looked at, not one taken since). Without force it asks the holder
// to give the lease back: the lease is marked released, the holder stops its
// work at its next renewal and frees the lease itself (or the lease expires,
// if the holder is gone); a holder on a session that listens is told at
// once, and renews then (see watchStopRequests). With force the lease is
// free at once: only for a holder known to be dead, since a live one goes
// on working until it learns of the release (at once or at its next
// renewal, as above) and then for its grace, while another may already
// hold the lease. The row and its fencing token stay. It returns the holder
// and token it released, or ErrNoJob if there was no live lease to release.
func (s *Store) ReleaseHeld(ctx context.Context, row, holder string, token int64, force bool) (string, int64, error) {
	return s.ReleaseHeldBy(ctx, row, holder, token, force, "")
}

// ReleaseHeldBy is ReleaseHeld that says who asks, and how, in words
// ("release by root@host"): the holder records it in the history as who
// stopped its run ("": not said). A lease table of an earlier version,
// without the column for it, is released all the same, without it.
func (s *Store) ReleaseHeldBy(ctx context.Context, row, holder string, token int64, force bool, by string) (string, int64, error) {
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
	var byArg *string
	if by != "" {
		byArg = &by
	}
	args := pgx.NamedArgs{"row": row, "holder": holderArg, "force": force, "token": tokenArg, "by": byArg, "table_channel": s.channel,
		"row_channel": jobChannel(s.channel, row), "slot_channel": jobChannel(s.channel, slotJob(row))}
	was, err := queryOne[releasedRow](ctx, s.db, s.sql.releaseAny, pgx.StrictNamedArgs(args))
	if pgerr.SQLState(err) == pgerr.CodeUndefinedColumn {
		delete(args, "by")
		was, err = queryOne[releasedRow](ctx, s.db, s.sql.releaseAnyUnsaid, pgx.StrictNamedArgs(args))
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows), pgerr.SQLState(err) == pgerr.CodeUndefinedTable:
		return "", 0, fmt.Errorf("no live lease on %q to release: %w", row, ErrNoJob)
	case err != nil:
		return "", 0, fmt.Errorf("cannot release lease %q: %w", row, pgerr.Classify(err))
	}
	return was.Holder, was.Token, nil
}

// releasedRow reads releaseAnySQL: the holder and token released, and the
// value of a forced release's notification.
type releasedRow struct {
	Holder   string
	Token    int64
	Notified *string
}
