package schema

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// A lease table has functions of its own besides leasewrap_check: the
// statements a fleet sends most, as PL/pgSQL functions, whose statements'
// plans a backend keeps once it ran them. A pooler in transaction mode
// (PgBouncer) cannot keep prepared statements, so a statement sent in full
// is parsed and planned at every execution; a call of such a function is
// planned in a few microseconds, and the function's own statements are
// planned once per backend. The lease package writes them (Function);
// Migrate creates those missing. They are an addition: a wrapper of an
// earlier version ignores them, and a Store whose role may not create them
// sends its statements in full.

// Function is one of a lease table's functions.
type Function struct {
	// Signature is its quoted name with its argument types, as
	// to_regprocedure reads it.
	Signature string
	// Create creates it, or replaces it with the same text.
	Create string
}

// FunctionName is the quoted name of the lease table's function whose
// name ends in suffix: the table's name and suffix, in the table's schema,
// shortened as HistoryTable's name is. A function whose definition
// changes takes a new suffix (the lease package puts a hash of it there),
// so that wrappers of two versions each call their own during a rolling
// upgrade.
func (o Objects) FunctionName(suffix string) string { return suffixed(o.table, suffix).Sanitize() }

// WithFunctions returns o with the functions Migrate creates and Read
// looks for besides leasewrap_check.
func (o Objects) WithFunctions(fns ...Function) Objects {
	o.functions = fns
	return o
}

// signatures are o's functions as to_regprocedure reads them.
func (o Objects) signatures() []string {
	out := make([]string, len(o.functions))
	for i, f := range o.functions {
		out[i] = f.Signature
	}
	return out
}

// A function of the right name and arguments is not enough: a role that
// may create functions in the table's schema could have put in one that
// answers "renewed" without writing, and a holder would run on past its
// lease. A function counts only when the lease table's owner owns it,
// who may change the table anyway (Migrate gives those it creates to
// the table's owner).

// hasFunctionsSQL holds when every function of @functions (signatures)
// exists and is owned by owner, the lease table's owner's oid (NULL: no
// table).
func hasFunctionsSQL(owner string) string {
	return `NOT EXISTS (SELECT FROM unnest(@functions::text[]) AS f
    LEFT JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(f)
    WHERE NOT coalesce(p.proowner = ` + owner + `, false))`
}

// foreignFunctionsSQL lists the functions of @functions that exist but
// are not owned by owner (see hasFunctionsSQL); none when there is no
// table.
func foreignFunctionsSQL(owner string) string {
	return `ARRAY(SELECT f FROM unnest(@functions::text[]) AS f
    JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(f)
    WHERE p.proowner <> ` + owner + `)`
}

// functionsSavepointSQL and functionsRollbackSQL keep a refused function
// from ending the migration's transaction (see createFunctions).
const (
	functionsSavepointSQL = `SAVEPOINT functions`
	functionsRollbackSQL  = `ROLLBACK TO SAVEPOINT functions`
)

// ownerSQL reads the owner of the table $1 (quoted), quoted.
const ownerSQL = `SELECT relowner::regrole::text FROM pg_catalog.pg_class WHERE oid = $1::text::regclass`

// createFunctions creates o's functions, in the transaction of a
// migration, gives them to the lease table's owner, and says so; nothing
// when there are none. They must never stop the tables' migration (a
// database without PL/pgSQL, a function of that name another role owns, a
// role that may not give them to the table's owner): a refusal is left
// under a savepoint, and the statements are sent in full.
func (o Objects) createFunctions(ctx context.Context, tx pgx.Tx) ([]string, error) {
	if len(o.functions) == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, functionsSavepointSQL); err != nil {
		return nil, err
	}
	var owner string
	err := tx.QueryRow(ctx, ownerSQL, o.Lease).Scan(&owner)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(o.functions))
	for i, f := range o.functions {
		if err := o.createFunction(ctx, tx, f, owner); err != nil {
			if _, rerr := tx.Exec(ctx, functionsRollbackSQL); rerr != nil {
				return nil, rerr
			}
			return nil, nil
		}
		names[i] = f.Signature
	}
	return []string{"created functions " + strings.Join(names, ", ")}, nil
}

// createFunction creates f and gives it to owner (quoted).
func (o Objects) createFunction(ctx context.Context, tx pgx.Tx, f Function, owner string) error {
	if _, err := tx.Exec(ctx, f.Create); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, alterOwnerSQL(f, owner))
	return err
}

// alterOwnerSQL gives f to owner (quoted).
func alterOwnerSQL(f Function, owner string) string {
	return "ALTER FUNCTION " + f.Signature + " OWNER TO " + owner
}
