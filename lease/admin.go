package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redbite/leasewrap/lease/internal/pgerr"
)

// Lease states as Status reports them. The first three are live: no other
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

// JobStatus is one job's lease row as an operator reads it. Times come from
// the database; ExpiresIn is measured on its clock.
type JobStatus struct {
	Job          string
	Holder       string
	State        string // StateHeld, StateReleasing, StateKept, StateReleased or StateExpired
	ExpiresIn    time.Duration
	FencingToken int64
	LastStarted  *time.Time
	LastFinished *time.Time
	LastExitCode *int
	LastHolder   *string
	// Slot is which of the job's Slots this row is (1 of 1 for a job with
	// one slot).
	Slot, Slots int
}

// Live reports whether no other holder can take the lease now.
func (j JobStatus) Live() bool { return j.ExpiresIn > 0 }

// ErrNoTable is matched (errors.Is) by the error of a read (Status,
// History, Freshness, Summaries) that found no lease table: a mistyped
// table name, or no job has run yet. Reads never create it.
var ErrNoTable = errors.New("no lease table")

// noTable is the error of a read that found no lease table.
func (s *Store) noTable() error {
	return fmt.Errorf("%w %s: check the table's name (leasewrap migrate or a job's first run creates it)", ErrNoTable, s.table.Sanitize())
}

// Status reads the lease rows, all of them or only job's when job is not
// empty. It never creates the table: without one it returns an error
// matching ErrNoTable. It reads the lease table only, never the history.
func (s *Store) Status(ctx context.Context, job string) ([]JobStatus, error) {
	st, err := s.objects.Read(ctx, s.db)
	if err != nil {
		return nil, err
	}
	if !st.TableExists {
		return nil, s.noTable()
	}
	if len(st.MissingColumns) > 0 {
		return nil, fmt.Errorf("lease table %s lacks %v: run leasewrap migrate", s.table.Sanitize(), st.MissingColumns)
	}
	var jobArg *string
	if job != "" {
		jobArg = &job
	}
	rows, err := s.db.Query(ctx, s.sql.status, jobArg)
	if err != nil {
		return nil, fmt.Errorf("cannot read lease table %s: %w", s.table.Sanitize(), pgerr.Classify(err))
	}
	var (
		out           []JobStatus
		js            JobStatus
		expiresMicros int64
	)
	_, err = pgx.ForEachRow(rows, []any{&js.Job, &js.Holder, &js.FencingToken, &expiresMicros, &js.State,
		&js.LastStarted, &js.LastFinished, &js.LastExitCode, &js.LastHolder, &js.Slot, &js.Slots}, func() error {
		js.ExpiresIn = time.Duration(expiresMicros) * time.Microsecond
		out = append(out, js)
		js = JobStatus{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read lease table %s: %w", s.table.Sanitize(), pgerr.Classify(err))
	}
	if job != "" && len(out) == 0 {
		return nil, fmt.Errorf("job %q: %w", job, ErrNoJob)
	}
	return out, nil
}

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
