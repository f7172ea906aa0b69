package schema

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
)

// Queryer is what reading the catalog needs: *pgxpool.Pool, *pgx.Conn and
// pgx.Tx have it.
type Queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// filledSQL holds for a column pg_attribute a describes that an INSERT may
// leave out: it has a default, or is an identity or generated column.
const filledSQL = `(a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '')`

// arbiterSQL holds for the pg_index row i when ON CONFLICT can use it as
// its arbiter for the column numbered keyNum: unique, immediate, valid,
// on that column alone, neither on an expression nor partial. The catalog
// read and the take's shape check both use it, so the two agree on what
// a key is.
func arbiterSQL(keyNum string) string {
	return `i.indisunique AND i.indimmediate AND i.indisvalid
      AND i.indnkeyatts = 1 AND i.indexprs IS NULL AND i.indpred IS NULL AND i.indkey[0] = ` + keyNum
}

// keyIndexSQL holds when the relation whose oid rel says has an index
// that ON CONFLICT (key) can use as its arbiter (see arbiterSQL).
func keyIndexSQL(rel, key string) string {
	return `EXISTS (SELECT FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_attribute ka ON ka.attrelid = i.indrelid AND ka.attname::text = ` + key + `
    WHERE i.indrelid = ` + rel + ` AND ` + arbiterSQL("ka.attnum") + `)`
}

// catalogSQL reads, in one round trip and without locking anything, what
// the checks need of one relation and of the fencing function: the
// relation's kind, columns and primary key, whether it has an index ON
// CONFLICT can use, this role's privileges on it, whether the function
// exists, whether the table's own do and its owner owns them (and which
// another role owns), and where an unqualified CREATE FUNCTION would put it and
// whether this role may. The catalogs are readable by every role, so this
// needs no privilege beyond USAGE on the schema.
//
// @relation the quoted relation, @key its key column (NULL: none),
// @function the function with its argument types, @functions the lease
// table's own (Objects.WithFunctions), @schema the table's schema as given
// (NULL: the first on search_path).
//
// The relation's oid is resolved through pg_class, as this statement's
// snapshot sees it: to_regclass alone resolves the name on the newest
// catalog while the joins read the snapshot, so a table another instance
// created in between would show as an oid without a pg_class row. Read
// says "no table yet" then, which Migrate's advisory lock sorts out.
var catalogSQL = `SELECT t.oid IS NOT NULL, coalesce(c.relkind::text, ''),
  coalesce(a.names, '{}'), coalesce(a.types, '{}'), coalesce(a.notnull, '{}'), coalesce(a.filled, '{}'),
  coalesce(k.pk, '{}'), ` + keyIndexSQL("t.oid", "@key::text") + `,
  t.oid IS NOT NULL AND pg_catalog.has_table_privilege(t.oid, 'INSERT') AND pg_catalog.has_table_privilege(t.oid, 'SELECT'),
  t.oid IS NOT NULL AND pg_catalog.has_table_privilege(t.oid, 'DELETE'),
  pg_catalog.to_regprocedure(@function::text) IS NOT NULL, ` + hasFunctionsSQL("c.relowner") + `,
  ` + foreignFunctionsSQL("c.relowner") + `, x.nsp,
  CASE WHEN x.nsp IN (SELECT nspname FROM pg_catalog.pg_namespace)
    THEN pg_catalog.has_schema_privilege(x.nsp, 'CREATE') ELSE false END
FROM (SELECT (SELECT oid FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass(@relation::text)) AS oid) t
CROSS JOIN (SELECT coalesce(@schema::text, current_schema()::text, '') AS nsp) x
LEFT JOIN pg_catalog.pg_class c ON c.oid = t.oid
LEFT JOIN LATERAL (
  SELECT array_agg(a.attname::text ORDER BY a.attnum) AS names,
    array_agg(pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS types,
    array_agg(a.attnotnull ORDER BY a.attnum) AS notnull,
    array_agg(` + filledSQL + ` ORDER BY a.attnum) AS filled
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped) a ON true
LEFT JOIN LATERAL (
  SELECT array_agg(pa.attname::text ORDER BY k.ord) AS pk
  FROM pg_catalog.pg_index i
  CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_catalog.pg_attribute pa ON pa.attrelid = i.indrelid AND pa.attnum = k.attnum
  WHERE i.indrelid = t.oid AND i.indisprimary AND k.ord <= i.indnkeyatts) k ON true`

// catalog is one row of catalogSQL.
type catalog struct {
	exists  bool
	kind    string
	names   []string
	types   []string
	notNull []bool
	filled  []bool
	pk      []string
	keyed   bool
	// canWrite: INSERT and SELECT; canDelete: DELETE.
	canWrite, canDelete bool
	hasCheck            bool
	hasFunctions        bool
	foreignFunctions    []string
	nsp                 string
	canCreate           bool
}

// read reads the catalog of t, named rel (quoted).
func (o Objects) read(ctx context.Context, q Queryer, t Table, rel string) (catalog, error) {
	var (
		cat      catalog
		key, nsp *string
	)
	if t.Key != "" {
		key = &t.Key
	}
	if len(o.table) > 1 {
		nsp = &o.table[0]
	}
	err := q.QueryRow(ctx, catalogSQL, pgx.StrictNamedArgs{"relation": rel, "key": key, "function": o.Function + checkArgs,
		"functions": o.signatures(), "schema": nsp}).
		Scan(&cat.exists, &cat.kind, &cat.names, &cat.types, &cat.notNull, &cat.filled, &cat.pk, &cat.keyed,
			&cat.canWrite, &cat.canDelete, &cat.hasCheck, &cat.hasFunctions, &cat.foreignFunctions, &cat.nsp, &cat.canCreate)
	if err != nil {
		return cat, fmt.Errorf("cannot look up %s %s: %w", t.What, rel, pgerr.Classify(err))
	}
	return cat, nil
}

// State is what the catalog says of the lease table, the fencing function
// and the history table. Read only returns one for a lease table that is
// usable or upgradeable.
type State struct {
	TableExists bool
	// MissingColumns are the lease table's columns an upgrade adds, and
	// SetNotNull those it gives the NOT NULL the statements need.
	MissingColumns []string
	SetNotNull     []string
	HasCheck       bool
	// HasFunctions: the lease table's own functions are all there, owned
	// by the table's owner; ForeignFunctions are those of their names
	// another role owns, which are not called.
	HasFunctions     bool
	ForeignFunctions []string
	// CheckSchema is where CREATE FUNCTION would put leasewrap_check, and
	// CanCreate whether this role may create it there.
	CheckSchema string
	CanCreate   bool
	History     HistoryState
}

// TableComplete reports whether the lease table needs no DDL.
func (st State) TableComplete() bool {
	return st.TableExists && len(st.MissingColumns) == 0 && len(st.SetNotNull) == 0
}

// complete reports whether nothing needs creating or upgrading.
func (st State) complete() bool {
	return st.TableComplete() && st.HasCheck && st.HasFunctions && st.History.Exists && len(st.History.MissingColumns) == 0
}

// HistoryState is what the catalog says of the history table.
type HistoryState struct {
	Exists   bool
	Complete bool
	CanWrite bool // INSERT and SELECT
	CanPrune bool // DELETE
	// MissingColumns are the columns a history table of an older version
	// lacks: Migrate adds them; until then the table is not Complete.
	MissingColumns []string
	// Problem is why a history table that exists is not one leasewrap can
	// write to (nil when it is): runs are then not recorded, and readers
	// say the history is unavailable.
	Problem *Error
}

// Read looks the lease table, the function and the history table up in the
// catalog, and checks that the lease table is one leasewrap may use or
// upgrade; if not, it returns an *Error. It only reads the catalog.
func (o Objects) Read(ctx context.Context, q Queryer) (State, error) {
	cat, err := o.read(ctx, q, Leases, o.Lease)
	if err != nil {
		return State{}, err
	}
	st := State{TableExists: cat.exists, HasCheck: cat.hasCheck, HasFunctions: cat.hasFunctions, ForeignFunctions: cat.foreignFunctions, CheckSchema: cat.nsp, CanCreate: cat.canCreate}
	if st.History, err = o.ReadHistory(ctx, q); err != nil {
		return State{}, err
	}
	if st.TableExists && cat.kind == "" {
		// Created by a transaction that committed while this statement
		// ran: the name resolves, the catalog row is not in its snapshot.
		// Migrate looks again under the schema lock.
		st = State{History: st.History, CheckSchema: st.CheckSchema, CanCreate: st.CanCreate}
	}
	if !st.TableExists {
		return st, nil
	}
	var mismatch *Error
	if st.MissingColumns, st.SetNotNull, mismatch = Leases.check(cat); mismatch != nil {
		mismatch.Table = o.Lease
		return State{}, mismatch
	}
	return st, nil
}

// ReadHistory looks the history table up and checks that it is one
// leasewrap may write to. A table of that name that is not is described in
// the state's Problem, not refused: only the lease table may stop a run.
// The error is for a catalog that could not be read.
func (o Objects) ReadHistory(ctx context.Context, q Queryer) (HistoryState, error) {
	cat, err := o.read(ctx, q, Runs, o.History)
	if err != nil {
		return HistoryState{}, err
	}
	hs := HistoryState{Exists: cat.exists, CanWrite: cat.canWrite, CanPrune: cat.canDelete}
	if !hs.Exists {
		return hs, nil
	}
	missing, _, mismatch := Runs.check(cat)
	if mismatch != nil {
		mismatch.Table, mismatch.History = o.History, true
		hs.Problem = mismatch
		return hs, nil //nolint:nilerr // a wrong shape is reported in the state, not as a failure to read it
	}
	hs.MissingColumns = missing
	hs.Complete = len(missing) == 0
	return hs, nil
}

// relkinds names the relation kinds that are not plain tables, for messages.
var relkinds = map[string]string{"p": "a partitioned table", "v": "a view", "m": "a materialized view", "f": "a foreign table",
	"S": "a sequence", "i": "an index", "I": "an index", "c": "a composite type", "t": "a TOAST table"}

// check compares a relation's catalog with t: it returns the first reason
// the relation is not one of ours (the caller names the table in it), or
// what an upgrade must do.
// t's columns come first, in their order, so the message is the same on
// every run. A missing NOT NULL is added by the upgrade rather than
// refused: the minimal table declares holder and expires_at without it,
// and tolerating NULLs there is not safe (see NotNull); rows that hold
// NULL make the upgrade fail as a whole, with nothing altered.
func (t Table) check(cat catalog) (missing, setNotNull []string, _ *Error) {
	refuse := func(e *Error) ([]string, []string, *Error) { return nil, nil, e }
	if !slices.Contains(t.Kinds, cat.kind) {
		kind := relkinds[cat.kind]
		if kind == "" {
			kind = "relation kind " + cat.kind
		}
		return refuse(&Error{Found: "it is " + kind, Want: t.Kind})
	}
	at := make(map[string]int, len(cat.names))
	for i, name := range cat.names {
		at[name] = i
	}
	for _, c := range t.Columns {
		i, ok := at[c.Name]
		switch {
		case !ok && c.Core:
			return refuse(&Error{Column: c.Name, Found: "missing", Want: c.Type})
		case !ok:
			missing = append(missing, c.Name)
		case cat.types[i] != c.Type:
			return refuse(&Error{Column: c.Name, Found: cat.types[i], Want: c.Type})
		case c.Nulls == NotNull && !cat.notNull[i]:
			setNotNull = append(setNotNull, c.Name)
		case c.Nulls == Nullable && cat.notNull[i]:
			return refuse(&Error{Column: c.Name, Found: c.Type + " NOT NULL", Want: c.Type + " without NOT NULL (leasewrap clears it)"})
		}
	}
	// Columns that are not ours are accepted as long as leasewrap's INSERT
	// can leave them out: by then the core columns with their types are in
	// place, which no unrelated table is likely to have, and people add
	// notes or audit columns. A NOT NULL column without a default would
	// make every INSERT fail.
	for i, name := range cat.names {
		if t.column(name) == nil && cat.notNull[i] && !cat.filled[i] {
			return refuse(&Error{Column: name, Found: cat.types[i] + " NOT NULL without a default",
				Want: "a column leasewrap need not fill: nullable or with a default"})
		}
	}
	if len(t.PrimaryKey) > 0 && !slices.Equal(cat.pk, t.PrimaryKey) {
		found := "it has no primary key"
		if len(cat.pk) > 0 {
			found = "its primary key is (" + strings.Join(cat.pk, ", ") + ")"
		}
		return refuse(&Error{Found: found, Want: "primary key (" + strings.Join(t.PrimaryKey, ", ") + ")"})
	}
	if t.Key == "" {
		return missing, setNotNull, nil
	}
	// A primary key on other columns means the rows are keyed by something
	// else.
	want := "primary key (" + t.Key + ")"
	if len(cat.pk) > 0 && (len(cat.pk) != 1 || cat.pk[0] != t.Key) {
		return refuse(&Error{Found: "its primary key is (" + strings.Join(cat.pk, ", ") + ")", Want: want})
	}
	if !cat.keyed {
		return refuse(&Error{Found: "it has no primary key or unique constraint on " + t.Key, Want: want})
	}
	return missing, setNotNull, nil
}
