package schema

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The first take of a Store runs without a separate catalog query: a cron
// run pays for one connection and two commits, and a round trip to read the
// catalog was a tenth of what is left to save.
//
// Trying the take and reading the catalog only when it fails would not be
// enough: a table whose expires_at is a timestamp without time zone takes
// the take without complaint (PostgreSQL converts both ways), and the take
// would then compare expiries in each session's time zone, so two wrappers
// could both see a lease expired. Such a table must be refused before it is
// written to. So the take is sent in one pipeline behind the shape checks,
// SELECTs that fail unless each table has exactly the shape Read accepts
// without DDL. They share one implicit transaction (one Sync): when a shape
// check fails, the server skips the take, and nothing is written. The shape
// checks only read system catalogs through their indexes; they cost no
// round trip, lock nothing and take no transaction id.
//
// What they cost is planning two catalog queries on a new backend, whose
// caches are cold: a few milliseconds of a cron run (BenchmarkColdTake*
// in package lease). The take cannot prove in the statement itself all
// that they prove: types, modifiers, width, key, relation kind and grants
// it could (pg_typeof, a cast to the row type, ON CONFLICT (job_name),
// pg_relation_filenode, has_table_privilege), but the NOT NULL flags Read
// upgrades or refuses, and which column a primary key is on, are in the
// catalog alone; and a stamp left on a checked table would not see an
// ALTER TABLE after it (that needs an event trigger, so a superuser).

// QueueShapeChecks queues in b the shape checks of the lease table and the
// history table, to go in front of a take that also records runs. prune
// says whether the take's release will prune old runs, which needs DELETE.
// A check that fails raises SQLSTATE 42704 (undefined_object), or 42P01
// when the table is missing: both class 42, which sends the caller to Read
// and Migrate.
func (o Objects) QueueShapeChecks(b *pgx.Batch, prune bool) {
	b.Queue(leaseShapeSQL, o.Lease, o.Function+checkArgs)
	b.Queue(historyShapeSQL, o.History, prune)
}

// leaseShapeSQL fails unless the lease table needs nothing from Migrate and
// the fencing function is there: $1 the quoted table, $2 the function with
// its argument types.
var leaseShapeSQL = Leases.shapeSQL(`pg_catalog.to_regprocedure($2::text) IS NOT NULL`)

// historyShapeSQL fails unless the history table is complete and this role
// may INSERT and SELECT, and DELETE when $2 says old runs are pruned: $1
// the quoted history table.
var historyShapeSQL = Runs.shapeSQL(`pg_catalog.has_table_privilege(c.oid, 'INSERT') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
  AND (NOT $2::boolean OR pg_catalog.has_table_privilege(c.oid, 'DELETE'))`)

// shapeSQL is the shape check of t, the SQL form of check finding nothing
// to refuse and nothing to upgrade: a relation of one of t's kinds, every
// one of t's columns with its exact type and the NOT NULLs the statements
// need, no column of the operator's that an INSERT would have to fill, and
// t's key; and also, a condition of the caller's. $1 is the relation.
func (t Table) shapeSQL(also string) string {
	want := make([]string, len(t.Columns))
	names := make([]string, len(t.Columns))
	kinds := make([]string, len(t.Kinds))
	for i, c := range t.Columns {
		nulls := "NULL::boolean" // either
		switch c.Nulls {
		case NotNull:
			nulls = "true"
		case Nullable:
			nulls = "false"
		}
		want[i] = "(" + quoteLiteral(c.Name) + ", " + quoteLiteral(c.Type) + ", " + nulls + ")"
		names[i] = quoteLiteral(c.Name)
	}
	for i, k := range t.Kinds {
		kinds[i] = quoteLiteral(k)
	}
	key := ""
	if t.Key != "" {
		key = `
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_attribute k ON k.attrelid = i.indrelid AND k.attnum = i.indkey[0]
    WHERE i.indrelid = c.oid AND i.indisprimary AND (i.indnkeyatts <> 1 OR k.attname::text <> ` + quoteLiteral(t.Key) + `))
  AND ` + keyIndexSQL("c.oid", quoteLiteral(t.Key))
	}
	// current_setting of a name no one can SET is the plain-SQL way to
	// raise an error; the name is the message an operator would see in
	// the log.
	return `SELECT CASE WHEN c.relkind IN (` + strings.Join(kinds, ", ") + `)
  AND ` + also + `
  AND (SELECT count(*) FROM pg_catalog.pg_attribute a
    JOIN (VALUES ` + strings.Join(want, ", ") + `) AS w(name, typ, nn) ON w.name = a.attname::text
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      AND pg_catalog.format_type(a.atttypid, a.atttypmod) = w.typ
      AND (w.nn IS NULL OR a.attnotnull = w.nn)) = ` + strconv.Itoa(len(t.Columns)) + `
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull AND NOT ` + filledSQL + `
      AND a.attname::text <> ALL (ARRAY[` + strings.Join(names, ", ") + `]))` + key + `
THEN true
ELSE pg_catalog.current_setting(` + quoteLiteral("leasewrap: the "+t.What+" needs a catalog check") + `)::boolean END
FROM pg_catalog.pg_class c WHERE c.oid = $1::text::regclass`
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
