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
	b.Queue(leaseShapeSQL, pgx.StrictNamedArgs{"relation": o.Lease, "function": o.Function + checkArgs, "functions": o.signatures()})
	b.Queue(historyShapeSQL, pgx.StrictNamedArgs{"relation": o.History, "prune": prune})
}

// leaseShapeSQL fails unless the lease table needs nothing from Migrate and
// the fencing function and the table's own (owned by the table's owner)
// are there: @relation the quoted
// table, @function the function with its argument types, @functions the
// table's own (Objects.WithFunctions).
var leaseShapeSQL = Leases.shapeSQL(`pg_catalog.to_regprocedure(@function::text) IS NOT NULL AND ` + hasFunctionsSQL("c.relowner"))

// historyShapeSQL fails unless the history table is complete and this role
// may INSERT and SELECT, and DELETE when @prune says old runs are pruned:
// @relation the quoted history table.
var historyShapeSQL = Runs.shapeSQL(`pg_catalog.has_table_privilege(c.oid, 'INSERT') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
  AND (NOT @prune::boolean OR pg_catalog.has_table_privilege(c.oid, 'DELETE'))`)

// shapeSQL is the shape check of t, the SQL form of check finding nothing
// to refuse and nothing to upgrade: a relation of one of t's kinds, every
// one of t's columns with its exact type and the NOT NULLs the statements
// need, no column of the operator's that an INSERT would have to fill, and
// t's key; and also, a condition of the caller's. @relation is the relation.
//
// It reads pg_attribute and pg_index once each, with no join: on a new
// backend, planning a catalog query costs about a millisecond a relation
// it reads, which is most of what the check costs.
func (t Table) shapeSQL(also string) string {
	cases := make([]string, len(t.Columns))
	names := make([]string, len(t.Columns))
	kinds := make([]string, len(t.Kinds))
	for i, c := range t.Columns {
		cond := "pg_catalog.format_type(a.atttypid, a.atttypmod) = " + quoteLiteral(c.Type)
		switch c.Nulls {
		case NotNull:
			cond += " AND a.attnotnull"
		case Nullable:
			cond += " AND NOT a.attnotnull"
		}
		cases[i] = "\n      WHEN " + quoteLiteral(c.Name) + " THEN " + cond
		names[i] = quoteLiteral(c.Name)
	}
	for i, k := range t.Kinds {
		kinds[i] = quoteLiteral(k)
	}
	keyNum, key := "NULL::int2", ""
	if t.Key != "" {
		keyNum = "max(a.attnum) FILTER (WHERE a.attname::text = " + quoteLiteral(t.Key) + ")"
		key = `
  AND (SELECT count(*) FILTER (WHERE i.indisprimary AND (i.indnkeyatts <> 1 OR i.indkey[0] <> a.key)) = 0
      AND count(*) FILTER (WHERE ` + arbiterSQL("a.key") + `) > 0
    FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid)`
	}
	// current_setting of a name no one can SET is the plain-SQL way to
	// raise an error; the name is the message an operator would see in
	// the log. A NULL anywhere in the condition raises it too.
	return `SELECT CASE WHEN c.relkind IN (` + strings.Join(kinds, ", ") + `)
  AND ` + also + `
  AND a.complete AND a.fillable` + key + `
THEN true
ELSE pg_catalog.current_setting(` + quoteLiteral("leasewrap: the "+t.What+" needs a catalog check") + `)::boolean END
FROM pg_catalog.pg_class c
CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE CASE a.attname::text` + strings.Join(cases, "") + `
      END) = ` + strconv.Itoa(len(t.Columns)) + ` AS complete,
    count(*) FILTER (WHERE a.attnotnull AND NOT ` + filledSQL + `
      AND a.attname::text <> ALL (ARRAY[` + strings.Join(names, ", ") + `])) = 0 AS fillable,
    ` + keyNum + ` AS key
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) a
WHERE c.oid = @relation::text::regclass`
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
