package lease

import (
	"context"
	"errors"
	"time"

	"github.com/redbite/leasewrap/schema"
)

// The table contract lives in package schema; what a Store's methods return
// of it is named here too, so that a program importing lease alone can
// match it.
const (
	// CheckFunction is the name of the SQL function that fences a child's
	// transaction: leasewrap_check(job text, token bigint, lease_table
	// text DEFAULT 'leader_lease'). It is created in the lease table's
	// schema.
	CheckFunction = schema.CheckFunction
	// ErrCodeFenced is the SQLSTATE leasewrap_check raises when the token
	// is not the job's current one or the lease has expired.
	ErrCodeFenced = schema.ErrCodeFenced
	// HistorySuffix ends the history table's name: the runs of leases in
	// table "t" are kept in "t_history", in the same schema.
	HistorySuffix = schema.HistorySuffix
)

// SchemaError means the table named for the leases (or their history)
// exists but is not one leasewrap can use or upgrade (see schema.Error).
type SchemaError = schema.Error

var (
	// ErrNotLeaseTable is matched (errors.Is) by every *SchemaError about
	// the lease table.
	ErrNotLeaseTable = schema.ErrNotLeaseTable
	// ErrFencingUnavailable is matched (errors.Is) by the error Migrate
	// returns when the table is complete but the role may not create
	// leasewrap_check in the table's schema. Nothing was altered. A Store
	// taking leases treats it as a warning: leases work without the
	// function, only fencing inside the database does not.
	ErrFencingUnavailable = schema.ErrFencingUnavailable
	// ErrHistoryUnavailable is matched (errors.Is) by the errors that say
	// the run history cannot be used: Migrate's when the history table is
	// missing and this role may not create it, or is not one leasewrap can
	// write to (a *SchemaError with History set), and the readers' when it
	// cannot be read. A Store taking leases treats it as a warning: runs
	// go on, and are not recorded.
	ErrHistoryUnavailable = schema.ErrHistoryUnavailable
)

// schemaTimeout bounds the look-up and any DDL before a first acquisition.
const schemaTimeout = 15 * time.Second

// Migrate creates the lease table, the leasewrap_check function and the
// history table, or adds what an older table lacks, and returns one line
// per change made (none when all was there). It is safe to run from many
// instances at once. A table that is neither leasewrap's (of any version)
// nor the minimal three-column one is refused with a *SchemaError and left
// as it is; a complete table whose function this role may not create gives
// an error matching ErrFencingUnavailable, also with nothing changed.
//
// A history table of that name that is not leasewrap's is left as it is,
// and reported with a *SchemaError (History set) after the lease table's
// changes: leases work without it, runs are not recorded.
//
// Once all that is in place, it also creates the claims table of
// scheduled jobs (which a scheduled instance would otherwise create when
// it starts), or checks the one there; an error about it matches
// ErrClaimsUnavailable.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	changes, m, err := s.objects.MigrateAll(ctx, s.db)
	if err == nil && m.History.Problem != nil {
		err = m.History.Problem
	}
	return changes, err
}

// ensureSchema migrates once per Store. The catalog look-up comes first
// because DDL takes an ACCESS EXCLUSIVE lock that would stall every other
// instance and every reader of the table. A function it may not create is
// warned about once, not fatal: the lease needs only SELECT, INSERT, UPDATE
// on a complete table. Once checked, it costs an atomic load.
func (s *Store) ensureSchema(ctx context.Context) error { return s.checkSchema(ctx, false) }

// checkSchema is ensureSchema; again says to read the catalog even when
// the tables were checked, for one an operator dropped since.
func (s *Store) checkSchema(ctx context.Context, again bool) error {
	if !again && s.checked.Load() != nil {
		return nil
	}
	s.migrating.Lock()
	defer s.migrating.Unlock()
	if !again && s.checked.Load() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	changes, m, err := s.objects.Migrate(ctx, s.db)
	var (
		fe *schema.FencingError
		he *schema.HistoryError
	)
	if errors.As(err, &fe) {
		s.log.Warn().Str("table", s.cfg.table).Msgf(
			"fencing function %s is missing and cannot be created (needs CREATE on schema %s); runs go on without it",
			CheckFunction, fe.Schema)
	}
	if errors.As(err, &he) {
		s.historyFailed(he)
	}
	if err != nil && fe == nil && he == nil {
		return err
	}
	for _, c := range changes {
		s.log.Info().Str("table", s.cfg.table).Msg(c)
	}
	s.warnForeignFunctions(m.ForeignFunctions)
	s.checked.Store(&tablesChecked{hist: s.useHistory(m.History), functions: m.Functions})
	return nil
}
