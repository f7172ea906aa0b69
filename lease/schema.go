package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redbite/leasewrap/lease/internal/pgerr"
)

// nullRule says what the statements need of a column's NULLs.
type nullRule int

const (
	// nullsAny: leasewrap writes a value on every take and never reads a
	// NULL back in a way that matters.
	nullsAny nullRule = iota
	// notNull: the statements compare or scan the value, and a NULL would
	// break them: a NULL expires_at never compares <= now(), so the job
	// could never be taken again; a NULL holder or token cannot be scanned.
	notNull
	// nullable: a take or a release writes NULL to it.
	nullable
)

// column is one of the lease table's columns.
type column struct {
	name string
	// typ is the type as format_type prints it, compared exactly: a
	// timestamp without time zone compared with now() depends on each
	// session's timezone, so two wrappers could both see a lease expired.
	typ string
	// def is the definition used when creating or adding the column.
	def   string
	nulls nullRule
	// core columns are the first three, the minimal lease table's: a table lacking any of them is
	// not a lease table of any age and is never upgraded.
	core bool
}

// columns are the lease table's columns. An older table (the minimal one has
// only the first three) gets the missing ones added with def.
var columns = []column{
	{"job_name", "text", "text PRIMARY KEY", notNull, true},
	{"holder", "text", "text NOT NULL", notNull, true},
	{"expires_at", "timestamp with time zone", "timestamptz NOT NULL", notNull, true},
	{"fencing_token", "bigint", "bigint NOT NULL DEFAULT 0", notNull, false},
	{"acquired_at", "timestamp with time zone", "timestamptz", nullsAny, false},
	{"renewed_at", "timestamp with time zone", "timestamptz", nullsAny, false},
	{"last_started_at", "timestamp with time zone", "timestamptz", nullsAny, false},
	{"last_finished_at", "timestamp with time zone", "timestamptz", nullable, false},
	{"last_exit_code", "integer", "integer", nullable, false},
	{"last_holder", "text", "text", nullsAny, false},
	{"released_at", "timestamp with time zone", "timestamptz", nullable, false},
	// slot and slots are set on the rows of a job with more than one slot
	// (NULL: a job with one): which slot the row is, and how many the job
	// has. Resetting slots to NULL is how an operator changes a job's N.
	{"slot", "integer", "integer", nullable, false},
	{"slots", "integer", "integer", nullable, false},
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

// ErrNotLeaseTable is matched (errors.Is) by every *SchemaError.
var ErrNotLeaseTable = errors.New("not a leasewrap table")

// SchemaError means the table named for the leases exists but is not a
// lease table leasewrap can use or upgrade. Nothing was altered. It names
// the first mismatch found: Column is the column at fault ("" when the
// fault is not one column's, such as the primary key), Found what the
// catalog says and Want what would be valid.
type SchemaError struct {
	Table  string // quoted, as in SQL
	Column string
	Found  string
	Want   string
	// History is set when Table is the run history table, not the lease
	// table: runs are not recorded, and the leases work on.
	History bool
}

func (e *SchemaError) Error() string {
	what := e.Found + ", want " + e.Want
	if e.Column != "" {
		what = "column " + e.Column + " is " + what
	}
	if e.History {
		return "history table " + e.Table + " is not a leasewrap history table: " + what
	}
	return "lease table " + e.Table + " is not a leasewrap table: " + what
}

// Unwrap makes errors.Is(err, ErrNotLeaseTable) true, or for the history
// table errors.Is(err, ErrHistoryUnavailable).
func (e *SchemaError) Unwrap() error {
	if e.History {
		return ErrHistoryUnavailable
	}
	return ErrNotLeaseTable
}

// ErrFencingUnavailable is matched (errors.Is) by the error Migrate returns
// when the table is complete but the role may not create leasewrap_check
// in the table's schema. Nothing was altered. A Store acquiring leases
// treats it as a warning: leases work without the function, only fencing
// inside the database (leasewrap_check) does not.
var ErrFencingUnavailable = errors.New("fencing function unavailable")

// fencingError is ErrFencingUnavailable with the schema at fault.
type fencingError struct {
	function string // quoted
	schema   string
}

func (e *fencingError) Error() string {
	return fmt.Sprintf("cannot create fencing function %s: needs CREATE on schema %s (run leasewrap migrate once as a role that has it)",
		e.function, e.schema)
}

func (e *fencingError) Unwrap() error { return ErrFencingUnavailable }

// schemaState is what the catalog says about the lease table and function.
// readSchema only returns one for a table that is usable or upgradeable.
type schemaState struct {
	tableExists    bool
	missingColumns []string
	// setNotNull are columns the statements need NOT NULL that lack it.
	setNotNull []string
	hasCheck   bool
	// checkSchema is where CREATE FUNCTION would put leasewrap_check, and
	// canCreate whether this role may create it there.
	checkSchema string
	canCreate   bool
	history     historyState
}

// tableComplete reports whether the table needs no DDL.
func (st schemaState) tableComplete() bool {
	return st.tableExists && len(st.missingColumns) == 0 && len(st.setNotNull) == 0
}

func (st schemaState) complete() bool {
	return st.tableComplete() && st.hasCheck && st.history.exists
}

// optionalMissing is the error for a complete lease table whose function
// or history table this role may not create: neither stops leases.
func (s *Store) optionalMissing(st schemaState) error {
	var errs []error
	if !st.hasCheck {
		errs = append(errs, &fencingError{function: s.checkFunction().Sanitize(), schema: st.checkSchema})
	}
	if !st.history.exists {
		errs = append(errs, &historyError{table: s.history.Sanitize(), schema: st.checkSchema})
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// checkFunction returns the function's name, in the table's schema.
func (s *Store) checkFunction() pgx.Identifier {
	return append(append(pgx.Identifier{}, s.table[:len(s.table)-1]...), CheckFunction)
}

// Migrate creates the lease table and the leasewrap_check function, or adds
// what an older table lacks, and returns one line per change made (none when
// all was there). It is safe to run from many instances at once. A table
// that is neither leasewrap's (of any version) nor the minimal three-column one
// three-column one is refused with a *SchemaError and left as it is; a
// complete table whose function this role may not create gives an error
// matching ErrFencingUnavailable, also with nothing changed.
//
// A history table of that name that is not leasewrap's is left as it is,
// and reported with a *SchemaError (History set) after the lease table's
// changes: leases work without it, runs are not recorded.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	changes, hs, err := s.migrate(ctx)
	if err == nil && hs.problem != nil {
		err = hs.problem
	}
	return changes, err
}

// migrate is Migrate that also returns what the catalog said of the
// history table (as it is after the changes).
func (s *Store) migrate(ctx context.Context) ([]string, historyState, error) {
	st, err := s.readSchema(ctx, s.db)
	if err != nil {
		return nil, historyState{}, err
	}
	if st.complete() {
		return nil, st.history, nil
	}
	// Skip the write transaction and its advisory lock when the only thing
	// to do is bound to fail: a least-privileged role has no CREATE.
	if st.tableComplete() && !st.canCreate {
		return nil, st.history, s.optionalMissing(st)
	}
	changes, err := s.migrateLocked(ctx)
	var schemaErr *SchemaError
	switch {
	case errors.As(err, &schemaErr), errors.Is(err, ErrFencingUnavailable):
		return nil, historyState{}, err
	case err != nil:
		return nil, historyState{}, fmt.Errorf("cannot create or upgrade lease table %s: %w", s.table.Sanitize(), pgerr.Classify(err))
	}
	// The history table is there now, and this role created it or could
	// already use it.
	hs, err := s.readHistory(ctx, s.db)
	return changes, hs, err
}

// ensureSchema runs Migrate once per Store. The catalog look-up comes first
// because DDL takes an ACCESS EXCLUSIVE lock that would stall every other
// instance and every reader of the table. A function it may not create is
// warned about once, not fatal: the lease needs only SELECT, INSERT, UPDATE
// on a complete table. Once checked, it costs an atomic load.
func (s *Store) ensureSchema(ctx context.Context) error {
	if s.checked.Load() != nil {
		return nil
	}
	s.migrating.Lock()
	defer s.migrating.Unlock()
	if s.checked.Load() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	changes, hs, err := s.migrate(ctx)
	var (
		fe *fencingError
		he *historyError
	)
	if errors.As(err, &fe) {
		s.log.Warn().Str("table", s.cfg.table).Msgf(
			"fencing function %s is missing and cannot be created (needs CREATE on schema %s); runs go on without it",
			CheckFunction, fe.schema)
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
	s.checked.Store(&tablesChecked{hist: s.useHistory(hs)})
	return nil
}

// migrateLocked runs the DDL in one transaction under the advisory lock, and
// looks at the catalog again once it holds the lock: another instance may
// have done the work while this one waited, or the table may have changed
// into one that is refused. Any refusal comes before the first DDL.
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
	changes, err := s.migrateTable(ctx, tx, st)
	if err != nil {
		return nil, err
	}
	if !st.hasCheck {
		change, err := s.createCheck(ctx, tx, st, len(changes) == 0)
		if err != nil {
			return nil, err
		}
		changes = append(changes, change)
	}
	if !st.history.exists {
		change, err := s.createHistory(ctx, tx)
		if err != nil {
			return nil, err
		}
		changes = append(changes, change)
	}
	return changes, tx.Commit(ctx)
}

// migrateTable creates the table or upgrades it to the columns and NOT NULLs
// the statements need.
func (s *Store) migrateTable(ctx context.Context, tx pgx.Tx, st schemaState) ([]string, error) {
	table := s.table.Sanitize()
	if !st.tableExists {
		defs := make([]string, len(columns))
		for i, c := range columns {
			defs[i] = pgx.Identifier{c.name}.Sanitize() + " " + c.def
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+table+" (\n  "+strings.Join(defs, ",\n  ")+"\n)"); err != nil {
			return nil, err
		}
		return []string{"created table " + table}, nil
	}
	if st.tableComplete() {
		return nil, nil
	}
	var alters, done []string
	for _, name := range st.missingColumns {
		alters = append(alters, "ADD COLUMN IF NOT EXISTS "+pgx.Identifier{name}.Sanitize()+" "+columnDef(name))
	}
	if len(st.missingColumns) > 0 {
		done = append(done, "added "+strings.Join(st.missingColumns, ", "))
	}
	for _, name := range st.setNotNull {
		alters = append(alters, "ALTER COLUMN "+pgx.Identifier{name}.Sanitize()+" SET NOT NULL")
	}
	if len(st.setNotNull) > 0 {
		done = append(done, "set NOT NULL on "+strings.Join(st.setNotNull, ", "))
	}
	if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" "+strings.Join(alters, ", ")); err != nil {
		return nil, s.nullsError(err)
	}
	return []string{fmt.Sprintf("upgraded table %s: %s", table, strings.Join(done, "; "))}, nil
}

// nullsError explains a SET NOT NULL that failed on rows holding NULL (the
// minimal three-column table allows them): the transaction rolls back, so nothing is
// altered, and the operator decides what those rows mean.
func (s *Store) nullsError(err error) error {
	var pgErr *pgconn.PgError
	if pgerr.SQLState(err) != pgerr.CodeNotNull || !errors.As(err, &pgErr) {
		return err
	}
	col := pgErr.ColumnName
	return &SchemaError{Table: s.table.Sanitize(), Column: col,
		Found: columnType(col) + " with NULL in some rows",
		Want:  columnType(col) + " NOT NULL (give those rows a value or delete them, then run leasewrap migrate)"}
}

// createCheck creates leasewrap_check. A refusal for want of privilege is a
// *fencingError when nothing else was to change (alone is true), so that
// acquiring goes on without the function.
func (s *Store) createCheck(ctx context.Context, tx pgx.Tx, st schemaState, alone bool) (string, error) {
	fn := s.checkFunction().Sanitize()
	_, err := tx.Exec(ctx, "CREATE OR REPLACE FUNCTION "+fn+checkFunctionBody)
	switch {
	case alone && pgerr.SQLState(err) == pgerr.CodeNoPrivilege:
		return "", &fencingError{function: fn, schema: st.checkSchema}
	case err != nil:
		return "", err
	}
	return "created function " + fn + "(job text, token bigint, lease_table text)", nil
}

func columnDef(name string) string { return findColumn(name).def }

func columnType(name string) string {
	if c := findColumn(name); c != nil {
		return c.typ
	}
	return "a column"
}

func findColumn(name string) *column {
	for i := range columns {
		if columns[i].name == name {
			return &columns[i]
		}
	}
	return nil
}

type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// resolvedOid is the oid of the relation named $1, as this statement's
// snapshot sees it. to_regclass alone resolves the name on the newest
// catalog while the joins read the snapshot: a table another instance
// created in between would show as an oid without a pg_class row. Through
// pg_class it is "no table yet", which the advisory lock then sorts out.
const resolvedOid = `(SELECT oid FROM pg_catalog.pg_class WHERE oid = to_regclass($1))`

// catalogQuery reads, in one round trip and without locking anything, the
// table's kind, columns and primary key, whether a unique index on job_name
// alone can serve ON CONFLICT (job_name), and whether leasewrap_check exists
// and could be created. The catalogs are readable by every role, so this
// needs no privilege beyond USAGE on the schema. $3 is the table's schema
// as given, or NULL for the first one on search_path, where an unqualified
// CREATE FUNCTION puts the function.

const catalogQuery = `SELECT t.oid IS NOT NULL, coalesce(c.relkind::text, ''),
  to_regprocedure($2) IS NOT NULL, x.nsp,
  CASE WHEN x.nsp IN (SELECT nspname FROM pg_catalog.pg_namespace)
    THEN pg_catalog.has_schema_privilege(x.nsp, 'CREATE') ELSE false END,
  coalesce(a.names, '{}'), coalesce(a.types, '{}'), coalesce(a.notnull, '{}'), coalesce(a.filled, '{}'),
  coalesce(k.pk, '{}'),
  EXISTS (SELECT FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_attribute ja ON ja.attrelid = i.indrelid AND ja.attnum = i.indkey[0]
    WHERE i.indrelid = t.oid AND i.indisunique AND i.indimmediate AND i.indisvalid
      AND i.indnkeyatts = 1 AND i.indexprs IS NULL AND i.indpred IS NULL AND ja.attname = 'job_name')
FROM (SELECT ` + resolvedOid + ` AS oid) t
CROSS JOIN (SELECT coalesce($3::text, current_schema()::text, '') AS nsp) x
LEFT JOIN pg_catalog.pg_class c ON c.oid = t.oid
LEFT JOIN LATERAL (
  SELECT array_agg(attname::text ORDER BY attnum) AS names,
    array_agg(pg_catalog.format_type(atttypid, atttypmod) ORDER BY attnum) AS types,
    array_agg(attnotnull ORDER BY attnum) AS notnull,
    array_agg(atthasdef OR attidentity <> '' OR attgenerated <> '' ORDER BY attnum) AS filled
  FROM pg_catalog.pg_attribute WHERE attrelid = t.oid AND attnum > 0 AND NOT attisdropped) a ON true
LEFT JOIN LATERAL (
  SELECT array_agg(pa.attname::text ORDER BY k.ord) AS pk
  FROM pg_catalog.pg_index i
  CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_catalog.pg_attribute pa ON pa.attrelid = i.indrelid AND pa.attnum = k.attnum
  WHERE i.indrelid = t.oid AND i.indisprimary AND k.ord <= i.indnkeyatts) k ON true`

// catalog is one row of catalogQuery.
type catalog struct {
	kind    string
	names   []string
	types   []string
	notNull []bool
	filled  []bool // has a default, or is an identity or generated column
	pk      []string
	jobKey  bool
}

// readSchema looks the table and function up in the catalog and checks that
// the table is one leasewrap may use or upgrade; if not, it returns a
// *SchemaError.
func (s *Store) readSchema(ctx context.Context, q queryer) (schemaState, error) {
	var (
		st  schemaState
		cat catalog
		nsp *string
	)
	if len(s.table) > 1 {
		nsp = &s.table[0]
	}
	err := q.QueryRow(ctx, catalogQuery, s.table.Sanitize(), s.checkFunction().Sanitize()+"(text,bigint,text)", nsp).
		Scan(&st.tableExists, &cat.kind, &st.hasCheck, &st.checkSchema, &st.canCreate,
			&cat.names, &cat.types, &cat.notNull, &cat.filled, &cat.pk, &cat.jobKey)
	if err != nil {
		return schemaState{}, fmt.Errorf("cannot look up lease table %s: %w", s.table.Sanitize(), pgerr.Classify(err))
	}
	if st.history, err = s.readHistory(ctx, q); err != nil {
		return schemaState{}, err
	}
	if st.tableExists && cat.kind == "" {
		// Created by a transaction that committed while this statement
		// ran: the name resolves, the catalog row is not in its snapshot.
		// Migrate looks again under the schema lock.
		st = schemaState{history: st.history, checkSchema: st.checkSchema, canCreate: st.canCreate}
	}
	if !st.tableExists {
		return st, nil
	}
	if mismatch := cat.check(&st); mismatch != nil {
		mismatch.Table = s.table.Sanitize()
		return schemaState{}, mismatch
	}
	return st, nil
}

// relkinds names the relation kinds that are not tables, for messages.
var relkinds = map[string]string{"p": "a partitioned table", "v": "a view", "m": "a materialized view", "f": "a foreign table",
	"S": "a sequence", "i": "an index", "I": "an index", "c": "a composite type", "t": "a TOAST table"}

// check returns the first reason the table is neither a lease table nor one
// to upgrade, or fills in what the upgrade must do. Our columns come first,
// in their order, so the message is the same on every run.
func (cat catalog) check(st *schemaState) *SchemaError {
	if e := cat.checkKind("a table", "r", "p"); e != nil {
		return e
	}
	at := cat.positions()
	for _, c := range columns {
		i, ok := at[c.name]
		if !ok {
			if c.core {
				return &SchemaError{Column: c.name, Found: "missing", Want: c.typ}
			}
			st.missingColumns = append(st.missingColumns, c.name)
			continue
		}
		if e := cat.checkColumn(c, i, st); e != nil {
			return e
		}
	}
	if e := cat.checkExtra(func(name string) bool { return findColumn(name) != nil }); e != nil {
		return e
	}
	return cat.checkKey()
}

// checkKind refuses a relation whose kind is not one of kinds.
func (cat catalog) checkKind(want string, kinds ...string) *SchemaError {
	if slices.Contains(kinds, cat.kind) {
		return nil
	}
	kind := relkinds[cat.kind]
	if kind == "" {
		kind = "relation kind " + cat.kind
	}
	return &SchemaError{Found: "it is " + kind, Want: want}
}

// positions maps the table's column names to their place in the catalog's
// arrays.
func (cat catalog) positions() map[string]int {
	at := make(map[string]int, len(cat.names))
	for i, name := range cat.names {
		at[name] = i
	}
	return at
}

// checkColumn compares one of our columns with the catalog's. A missing NOT
// NULL is added by the upgrade rather than refused: the three-column table
// declares holder and expires_at without it, and tolerating NULLs there is
// not safe (see notNull). Rows that hold NULL make the upgrade fail as a
// whole, with nothing altered.
func (cat catalog) checkColumn(c column, i int, st *schemaState) *SchemaError {
	switch {
	case cat.types[i] != c.typ:
		return &SchemaError{Column: c.name, Found: cat.types[i], Want: c.typ}
	case c.nulls == notNull && !cat.notNull[i]:
		st.setNotNull = append(st.setNotNull, c.name)
	case c.nulls == nullable && cat.notNull[i]:
		// Dropping the user's constraint is not ours to decide.
		return &SchemaError{Column: c.name, Found: c.typ + " NOT NULL", Want: c.typ + " without NOT NULL (leasewrap clears it)"}
	}
	return nil
}

// checkExtra accepts columns that are not ours as long as leasewrap's INSERT
// can leave them out: by then the three core columns with their types
// and key are in place, which no unrelated table is likely to have, and
// people add notes or audit columns to a lease table. A NOT NULL column
// without a default would make every first take of a job fail.
func (cat catalog) checkExtra(ours func(name string) bool) *SchemaError {
	for i, name := range cat.names {
		if !ours(name) && cat.notNull[i] && !cat.filled[i] {
			return &SchemaError{Column: name, Found: cat.types[i] + " NOT NULL without a default",
				Want: "a column leasewrap need not fill: nullable or with a default"}
		}
	}
	return nil
}

// checkKey requires what ON CONFLICT (job_name) needs: a primary key, or a
// unique index that is neither partial nor deferrable, on job_name alone.
// A primary key on other columns means the rows are keyed by something else.
func (cat catalog) checkKey() *SchemaError {
	want := "primary key (job_name)"
	if len(cat.pk) > 0 && (len(cat.pk) != 1 || cat.pk[0] != "job_name") {
		return &SchemaError{Found: "its primary key is (" + strings.Join(cat.pk, ", ") + ")", Want: want}
	}
	if !cat.jobKey {
		return &SchemaError{Found: "it has no primary key or unique constraint on job_name", Want: want}
	}
	return nil
}
