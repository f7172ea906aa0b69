package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
)

// DB is what Migrate needs: *pgxpool.Pool and *pgx.Conn have it.
type DB interface {
	Queryer
	Begin(ctx context.Context) (pgx.Tx, error)
}

// lockKey serialises leasewrap's DDL across all instances: concurrent
// CREATE TABLE IF NOT EXISTS can fail on the catalog's unique indexes.
const lockKey int64 = 0x6c656173657772 // "leaswr"

// Migrate creates the lease table, the leasewrap_check function and the
// history table, or adds what an older lease table lacks, and returns one
// line per change made (none when all was there) and the history table's
// state after. It is safe to run from many instances at once. A lease
// table that is neither leasewrap's (of any version) nor the minimal
// three-column one is refused with an *Error and left as it is. When the
// lease table is complete and the role may not create what else is
// missing, nothing is changed and the error is a *FencingError, a
// *HistoryError, or both joined; the lease table's own functions
// (WithFunctions) such a role leaves missing, without an error: its
// statements are then sent in full.
func (o Objects) Migrate(ctx context.Context, db DB) ([]string, Migrated, error) {
	return o.migrate(ctx, db, false)
}

// Migrated is what Migrate left in place: the history table's state, and
// whether the lease table's own functions are all there (see
// State.HasFunctions), and those of their names another role owns.
type Migrated struct {
	History          HistoryState
	Functions        bool
	ForeignFunctions []string
}

// MigrateAll is Migrate that also creates the claims table of scheduled
// jobs (in the same transaction, so that of many instances running it at
// once one makes every change), and then checks that this role may use
// it: an error matching ErrClaimsUnavailable when not.
func (o Objects) MigrateAll(ctx context.Context, db DB) ([]string, Migrated, error) {
	changes, m, err := o.migrate(ctx, db, true)
	if err != nil {
		return changes, m, err
	}
	change, err := o.MigrateClaims(ctx, db)
	if change != "" {
		changes = append(changes, change)
	}
	return changes, m, err
}

func (o Objects) migrate(ctx context.Context, db DB, claims bool) ([]string, Migrated, error) {
	st, err := o.Read(ctx, db)
	if err != nil {
		return nil, Migrated{}, err
	}
	if claims {
		cs, err := o.ReadClaims(ctx, db)
		if err != nil {
			return nil, Migrated{}, err
		}
		claims = !cs.Exists
	}
	if st.complete() && !claims {
		return nil, Migrated{History: st.History, Functions: true}, nil
	}
	// Skip the write transaction and its advisory lock when the only thing
	// to do is bound to fail: a least-privileged role has no CREATE.
	if st.TableComplete() && !st.CanCreate {
		return nil, Migrated{History: o.unupgraded(st.History), Functions: st.HasFunctions, ForeignFunctions: st.ForeignFunctions},
			o.optionalMissing(st)
	}
	changes, fns, err := o.migrateLocked(ctx, db, claims)
	var mismatch *Error
	switch {
	case errors.As(err, &mismatch), errors.Is(err, ErrFencingUnavailable):
		return nil, Migrated{}, err
	case err != nil:
		return nil, Migrated{}, fmt.Errorf("cannot create or upgrade lease table %s: %w", o.Lease, pgerr.Classify(err))
	}
	// The history table is there now, and this role created it or could
	// already use it.
	hs, err := o.ReadHistory(ctx, db)
	fns.History = o.unupgraded(hs)
	return changes, fns, err
}

// unupgraded gives a history table that still lacks columns after Migrate
// (this role may not ALTER it) a Problem, so that runs are not recorded
// and the operator is told once why, rather than every release failing.
func (o Objects) unupgraded(hs HistoryState) HistoryState {
	if hs.Problem != nil || len(hs.MissingColumns) == 0 {
		return hs
	}
	c := Runs.column(hs.MissingColumns[0])
	hs.Problem = &Error{Table: o.History, History: true, Column: c.Name, Found: "missing",
		Want: c.Type + " (run leasewrap migrate as a role that may ALTER it)"}
	return hs
}

// optionalMissing is the error for a complete lease table whose function
// or history table this role may not create: neither stops leases.
func (o Objects) optionalMissing(st State) error {
	var errs []error
	if !st.HasCheck {
		errs = append(errs, &FencingError{Function: o.Function, Schema: st.CheckSchema})
	}
	if !st.History.Exists {
		errs = append(errs, &HistoryError{Table: o.History, Schema: st.CheckSchema})
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// migrateLocked runs the DDL in one transaction under the advisory lock, and
// looks at the catalog again once it holds the lock: another instance may
// have done the work while this one waited, or the table may have changed
// into one that is refused. Any refusal comes before the first DDL. It
// also reports whether the lease table's own functions are there after,
// and which of their names another role owns (fns, without History).
func (o Objects) migrateLocked(ctx context.Context, db DB, claims bool) (changes []string, fns Migrated, err error) {
	tx, err := o.lockSchema(ctx, db)
	if err != nil {
		return nil, fns, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	st, err := o.Read(ctx, tx)
	if err != nil {
		return nil, fns, err
	}
	if changes, err = o.migrateTable(ctx, tx, st); err != nil {
		return nil, fns, err
	}
	if !st.HasCheck {
		change, err := o.createCheck(ctx, tx, st, len(changes) == 0)
		if err != nil {
			return nil, fns, err
		}
		changes = append(changes, change)
	}
	fns.Functions = st.HasFunctions
	if !fns.Functions {
		change, err := o.createFunctions(ctx, tx)
		if err != nil {
			return nil, fns, err
		}
		changes, fns.Functions = append(changes, change...), len(change) > 0
		if !fns.Functions {
			fns.ForeignFunctions = st.ForeignFunctions
		}
	}
	more, err := o.migrateOthers(ctx, tx, st, claims)
	if err != nil {
		return nil, fns, err
	}
	return append(changes, more...), fns, tx.Commit(ctx)
}

// migrateOthers creates or upgrades the history table, and creates the
// claims table when claims says, in the transaction of migrateLocked.
func (o Objects) migrateOthers(ctx context.Context, tx pgx.Tx, st State, claims bool) ([]string, error) {
	var changes []string
	if !st.History.Exists {
		if err := Runs.create(ctx, tx, o.History); err != nil {
			return nil, err
		}
		changes = append(changes, "created history table "+o.History)
	} else if len(st.History.MissingColumns) > 0 && st.History.Problem == nil {
		change, err := o.upgradeHistory(ctx, tx, st.History.MissingColumns)
		if err != nil {
			return nil, err
		}
		changes = append(changes, change...)
	}
	if claims {
		cs, err := o.ReadClaims(ctx, tx)
		if err != nil {
			return nil, err
		}
		if !cs.Exists {
			if err := o.createClaimsTable(ctx, tx); err != nil {
				return nil, err
			}
			changes = append(changes, "created claims table "+o.Claims)
		}
	}
	return changes, nil
}

// lockTimeoutSQL bounds the wait of a schema change's locks (see
// lockSchema), and lockSQL takes the lock that serialises leasewrap's DDL:
// @lock_key, lockKey.
const (
	lockTimeoutSQL = `SET LOCAL lock_timeout = '5s'`
	lockSQL        = `SELECT pg_advisory_xact_lock(@lock_key)`
)

// lockSchema begins the transaction of a schema change and takes the lock
// that serialises leasewrap's DDL (lockKey), waiting as long as ctx allows.
// A long reader of a table must not make its ALTER or CREATE INDEX queue
// for ever, blocking every renewal behind it: the change itself gives up
// after 5s and the caller retries.
// The caller rolls back or commits.
func (o Objects) lockSchema(ctx context.Context, db DB) (pgx.Tx, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	// The lock is taken before the timeout is set: waiting for another
	// instance's change blocks no renewal, and many instances of a new
	// deployment start together on a table none has created yet.
	if _, err = tx.Exec(ctx, lockSQL, pgx.StrictNamedArgs{"lock_key": lockKey}); err == nil {
		_, err = tx.Exec(ctx, lockTimeoutSQL)
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

// upgradeHistory adds the columns an older history table lacks. A role
// that may not ALTER it (only the owner may) leaves it as it is, and
// Migrate reports the table as not recording: the history must never stop
// the lease table's migration, so the ALTER runs under a savepoint.
func (o Objects) upgradeHistory(ctx context.Context, tx pgx.Tx, missing []string) ([]string, error) {
	if _, err := tx.Exec(ctx, historySavepointSQL); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, o.upgradeHistorySQL(missing)); err != nil {
		if _, rerr := tx.Exec(ctx, historyRollbackSQL); rerr != nil {
			return nil, rerr
		}
		return nil, nil
	}
	return []string{fmt.Sprintf("upgraded history table %s: added %s", o.History, strings.Join(missing, ", "))}, nil
}

// historySavepointSQL and historyRollbackSQL keep a failed upgrade of the
// history table from ending the migration's transaction.
const (
	historySavepointSQL = `SAVEPOINT history_upgrade`
	historyRollbackSQL  = `ROLLBACK TO SAVEPOINT history_upgrade`
)

// upgradeHistorySQL adds the history table's missing columns.
func (o Objects) upgradeHistorySQL(missing []string) string {
	alters := make([]string, len(missing))
	for i, name := range missing {
		alters[i] = "ADD COLUMN IF NOT EXISTS " + pgx.Identifier{name}.Sanitize() + " " + Runs.column(name).Def
	}
	return "ALTER TABLE " + o.History + " " + strings.Join(alters, ", ")
}

// migrateTable creates the lease table or upgrades it to the columns and
// NOT NULLs the statements need.
func (o Objects) migrateTable(ctx context.Context, tx pgx.Tx, st State) ([]string, error) {
	if !st.TableExists {
		if err := Leases.create(ctx, tx, o.Lease); err != nil {
			return nil, err
		}
		return []string{"created table " + o.Lease}, nil
	}
	if st.TableComplete() {
		return nil, nil
	}
	var done []string
	if len(st.MissingColumns) > 0 {
		done = append(done, "added "+strings.Join(st.MissingColumns, ", "))
	}
	if len(st.SetNotNull) > 0 {
		done = append(done, "set NOT NULL on "+strings.Join(st.SetNotNull, ", "))
	}
	if _, err := tx.Exec(ctx, o.upgradeLeaseSQL(st.MissingColumns, st.SetNotNull)); err != nil {
		return nil, o.nullsError(err)
	}
	return []string{fmt.Sprintf("upgraded table %s: %s", o.Lease, strings.Join(done, "; "))}, nil
}

// upgradeLeaseSQL adds the lease table's missing columns and gives those
// of setNotNull their NOT NULL.
func (o Objects) upgradeLeaseSQL(missing, setNotNull []string) string {
	var alters []string
	for _, name := range missing {
		alters = append(alters, "ADD COLUMN IF NOT EXISTS "+pgx.Identifier{name}.Sanitize()+" "+Leases.column(name).Def)
	}
	for _, name := range setNotNull {
		alters = append(alters, "ALTER COLUMN "+pgx.Identifier{name}.Sanitize()+" SET NOT NULL")
	}
	return "ALTER TABLE " + o.Lease + " " + strings.Join(alters, ", ")
}

// create creates t as name (quoted), with its indexes.
func (t Table) create(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, t.createSQL(name)); err != nil {
		return err
	}
	for _, cols := range t.Indexes {
		if _, err := tx.Exec(ctx, createIndexSQL(name, cols)); err != nil {
			return err
		}
	}
	return nil
}

// createSQL creates t as name (quoted), without its indexes.
func (t Table) createSQL(name string) string {
	defs := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		defs[i] = pgx.Identifier{c.Name}.Sanitize() + " " + c.Def
	}
	if len(t.PrimaryKey) > 0 {
		cols := make([]string, len(t.PrimaryKey))
		for i, c := range t.PrimaryKey {
			cols[i] = pgx.Identifier{c}.Sanitize()
		}
		defs = append(defs, "PRIMARY KEY ("+strings.Join(cols, ", ")+")")
	}
	return "CREATE TABLE " + name + " (\n  " + strings.Join(defs, ",\n  ") + "\n)"
}

// createIndexSQL indexes the table name (quoted) on cols, one of its
// Indexes.
func createIndexSQL(name, cols string) string { return "CREATE INDEX ON " + name + " (" + cols + ")" }

// nullsError explains a SET NOT NULL that failed on rows holding NULL (the
// minimal three-column table allows them): the transaction rolls back, so
// nothing is altered, and the operator decides what those rows mean.
func (o Objects) nullsError(err error) error {
	column, ok := pgerr.NotNullColumn(err)
	if !ok {
		return err
	}
	typ := "a column"
	if c := Leases.column(column); c != nil {
		typ = c.Type
	}
	return &Error{Table: o.Lease, Column: column,
		Found: typ + " with NULL in some rows",
		Want:  typ + " NOT NULL (give those rows a value or delete them, then run leasewrap migrate)"}
}

// createCheck creates leasewrap_check. A refusal for want of privilege is a
// *FencingError when nothing else was to change (alone is true), so that
// taking leases goes on without the function.
func (o Objects) createCheck(ctx context.Context, tx pgx.Tx, st State, alone bool) (string, error) {
	_, err := tx.Exec(ctx, o.createCheckSQL())
	switch {
	case alone && pgerr.SQLState(err) == pgerr.CodeNoPrivilege:
		return "", &FencingError{Function: o.Function, Schema: st.CheckSchema}
	case err != nil:
		return "", err
	}
	return "created function " + o.Function + "(job text, token bigint, lease_table text)", nil
}

// createCheckSQL creates leasewrap_check, or replaces it.
func (o Objects) createCheckSQL() string {
	return "CREATE OR REPLACE FUNCTION " + o.Function + checkFunctionBody
}
