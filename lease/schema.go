package lease

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// columns are the lease table's columns with the type each is added with
// when upgrading an older table (the article's has only the first three).
var columns = []struct{ name, def string }{
	{"job_name", "text PRIMARY KEY"},
	{"holder", "text NOT NULL"},
	{"expires_at", "timestamptz NOT NULL"},
	{"fencing_token", "bigint NOT NULL DEFAULT 0"},
	{"acquired_at", "timestamptz"},
	{"renewed_at", "timestamptz"},
	{"last_started_at", "timestamptz"},
	{"last_finished_at", "timestamptz"},
	{"last_exit_code", "integer"},
	{"last_holder", "text"},
	{"released_at", "timestamptz"},
}

// CheckFunction is the name of the SQL function that fences a child's
// transaction: leasewrap_check(job text, token bigint, lease_table text
// DEFAULT 'leader_lease'). It is created in the lease table's schema.
const CheckFunction = "leasewrap_check"

// ErrCodeFenced is the SQLSTATE leasewrap_check raises when the token is not
// the job's current one or the lease has expired.
const ErrCodeFenced = "LW001"

// checkFunctionBody locks the lease row FOR KEY SHARE until the caller's
// transaction ends. That does not block the holder's renewals, but a
// takeover (which also sets the key column) waits for it, so no new leader
// starts in the middle of a fenced transaction. The table name is resolved
// through regclass at run time, which quotes it.
const checkFunctionBody = `(job text, token bigint, lease_table text DEFAULT 'leader_lease')
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  current_token bigint;
  live boolean;
BEGIN
  EXECUTE format('SELECT fencing_token, expires_at > clock_timestamp() FROM %s WHERE job_name = $1 FOR KEY SHARE',
                 lease_table::regclass)
    INTO current_token, live USING job;
  IF current_token IS NULL THEN
    RAISE EXCEPTION 'leasewrap: no lease for job %', job USING ERRCODE = '` + ErrCodeFenced + `';
  ELSIF current_token <> token THEN
    RAISE EXCEPTION 'leasewrap: fencing token % of job % is stale, the current one is %', token, job, current_token
      USING ERRCODE = '` + ErrCodeFenced + `';
  ELSIF NOT live THEN
    RAISE EXCEPTION 'leasewrap: the lease on job % has expired', job USING ERRCODE = '` + ErrCodeFenced + `';
  END IF;
END
$fn$`

// schemaTimeout bounds the look-up and any DDL before a first acquisition.
const schemaTimeout = 15 * time.Second

// schemaLockKey serialises leasewrap's DDL across all instances: concurrent
// CREATE TABLE IF NOT EXISTS can fail on the catalog's unique indexes.
const schemaLockKey int64 = 0x6c656173657772 // "leaswr"

// schemaState is what the catalog says about the lease table and function.
type schemaState struct {
	tableExists    bool
	missingColumns []string
	hasCheck       bool
}

func (st schemaState) complete() bool {
	return st.tableExists && len(st.missingColumns) == 0 && st.hasCheck
}

// checkFunction returns the function's name, in the table's schema.
func (s *Store) checkFunction() pgx.Identifier {
	return append(append(pgx.Identifier{}, s.table[:len(s.table)-1]...), CheckFunction)
}

// Migrate creates the lease table and the leasewrap_check function, or adds
// what an older table lacks, and returns one line per change made (none when
// all was there). It is safe to run from many instances at once.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	st, err := s.readSchema(ctx, s.db)
	if err != nil {
		return nil, err
	}
	if st.complete() {
		return nil, nil
	}
	changes, err := s.migrateLocked(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot create or upgrade lease table %s: %w", s.table.Sanitize(), classify(err))
	}
	return changes, nil
}

// ensureSchema runs Migrate once per Store. The catalog look-up comes first
// because DDL takes an ACCESS EXCLUSIVE lock that would stall every other
// instance and every reader of the table.
func (s *Store) ensureSchema(ctx context.Context) error {
	s.schemaMu.Lock()
	defer s.schemaMu.Unlock()
	if s.schemaReady {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	changes, err := s.Migrate(ctx)
	if err != nil {
		return err
	}
	for _, c := range changes {
		s.log.Info().Str("table", s.cfg.table).Msg(c)
	}
	s.schemaReady = true
	return nil
}

// migrateLocked runs the DDL in one transaction under the advisory lock, and
// looks at the catalog again once it holds the lock: another instance may
// have done the work while this one waited.
func (s *Store) migrateLocked(ctx context.Context) ([]string, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A long reader of the table must not make an ALTER queue for ever: it
	// would block every renewal behind it. Give up and let the caller retry.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
		return nil, err
	}
	st, err := s.readSchema(ctx, tx)
	if err != nil {
		return nil, err
	}
	table := s.table.Sanitize()
	var changes []string
	switch {
	case !st.tableExists:
		defs := make([]string, len(columns))
		for i, c := range columns {
			defs[i] = pgx.Identifier{c.name}.Sanitize() + " " + c.def
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+table+" (\n  "+strings.Join(defs, ",\n  ")+"\n)"); err != nil {
			return nil, err
		}
		changes = append(changes, "created table "+table)
	case len(st.missingColumns) > 0:
		adds := make([]string, len(st.missingColumns))
		for i, name := range st.missingColumns {
			adds[i] = "ADD COLUMN IF NOT EXISTS " + pgx.Identifier{name}.Sanitize() + " " + columnDef(name)
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" "+strings.Join(adds, ", ")); err != nil {
			return nil, err
		}
		changes = append(changes, fmt.Sprintf("upgraded table %s: added %s", table, strings.Join(st.missingColumns, ", ")))
	}
	if !st.hasCheck {
		fn := s.checkFunction().Sanitize()
		if _, err := tx.Exec(ctx, "CREATE OR REPLACE FUNCTION "+fn+checkFunctionBody); err != nil {
			return nil, err
		}
		changes = append(changes, "created function "+fn+"(job text, token bigint, lease_table text)")
	}
	return changes, tx.Commit(ctx)
}

func columnDef(name string) string {
	for _, c := range columns {
		if c.name == name {
			return c.def
		}
	}
	panic("lease: unknown column " + name)
}

type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readSchema looks the table and function up in the catalog without locking
// either.
func (s *Store) readSchema(ctx context.Context, q queryer) (schemaState, error) {
	var (
		st   schemaState
		have []string
	)
	err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regprocedure($2) IS NOT NULL,
  coalesce((SELECT array_agg(a.attname::text) FROM pg_catalog.pg_attribute a
            WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped), '{}')`,
		s.table.Sanitize(), s.checkFunction().Sanitize()+"(text,bigint,text)").Scan(&st.tableExists, &st.hasCheck, &have)
	if err != nil {
		return schemaState{}, fmt.Errorf("cannot look up lease table %s: %w", s.table.Sanitize(), classify(err))
	}
	present := make(map[string]bool, len(have))
	for _, name := range have {
		present[name] = true
	}
	if st.tableExists {
		for _, c := range columns {
			if !present[c.name] {
				st.missingColumns = append(st.missingColumns, c.name)
			}
		}
	}
	return st, nil
}
