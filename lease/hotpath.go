package lease

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The first acquire of a Store runs without a separate catalog query: a cron
// run pays for one connection and two commits, and a round trip to read the
// catalog was a tenth of what is left to save.
//
// Trying the acquire and reading the catalog only when it fails would not be
// enough: a table whose expires_at is a timestamp without time zone takes the
// acquire without complaint (PostgreSQL converts both ways), and the take
// would then compare expiries in each session's time zone, so two wrappers
// could both see a lease expired. Such a table must be refused before it is
// written to. So the acquire is sent in one pipeline with shapeCheck, a
// SELECT that fails unless the table has exactly the shape the full check
// (readSchema) accepts without DDL. The two share one implicit transaction
// (one Sync): when the shape check fails, the server skips the acquire, and
// nothing is written. The shape check only reads system catalogs through
// their indexes; it costs no round trip, locks nothing and takes no
// transaction id.
//
// Its failure, or an acquire that fails for want of a table, column, unique
// index or the like, sends the Store down the slow path: ensureSchema reads
// the catalog, creates or upgrades the table (or refuses it with a
// *SchemaError, nothing altered), and the plain acquire follows. After one
// success either way, a Store uses the plain acquire: its table was checked.

// shapeCheck fails, with SQLSTATE 42704 (undefined_object) or 42P01 when the
// table is missing, unless the table needs nothing from Migrate: a table (or
// partitioned table), every one of columns with its exact type and the NOT
// NULLs the statements need, no column of the operator's that an INSERT
// would have to fill, a primary key on job_name if any, and the fencing
// function. $1 is the quoted table, $2 the function with its argument types.
// A missing unique index on job_name is left to the acquire itself, which
// then fails with 42P10 or 55000.
var shapeCheck = newShapeCheck()

func newShapeCheck() string {
	want := make([]string, len(columns))
	names := make([]string, len(columns))
	for i, c := range columns {
		nulls := "NULL" // either
		switch c.nulls {
		case notNull:
			nulls = "true"
		case nullable:
			nulls = "false"
		}
		want[i] = "(" + quoteLiteral(c.name) + ", " + quoteLiteral(c.typ) + ", " + nulls + ")"
		names[i] = quoteLiteral(c.name)
	}
	// current_setting of a name no one can SET is the plain-SQL way to raise
	// an error; the name is the message an operator would see in the log.
	return `SELECT CASE WHEN c.relkind IN ('r', 'p')
  AND pg_catalog.to_regprocedure($2::text) IS NOT NULL
  AND (SELECT count(*) FROM pg_catalog.pg_attribute a
    JOIN (VALUES ` + strings.Join(want, ", ") + `) AS w(name, typ, nn) ON w.name = a.attname::text
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      AND pg_catalog.format_type(a.atttypid, a.atttypmod) = w.typ
      AND (w.nn IS NULL OR a.attnotnull = w.nn)) = ` + strconv.Itoa(len(columns)) + `
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull
      AND NOT (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '')
      AND a.attname::text <> ALL (ARRAY[` + strings.Join(names, ", ") + `]))
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_attribute k ON k.attrelid = i.indrelid AND k.attnum = i.indkey[0]
    WHERE i.indrelid = c.oid AND i.indisprimary AND (i.indnkeyatts <> 1 OR k.attname <> 'job_name'))
THEN true
ELSE pg_catalog.current_setting('leasewrap: the lease table needs a catalog check')::boolean END
FROM pg_catalog.pg_class c WHERE c.oid = $1::text::regclass`
}

// historyShapeCheck fails like shapeCheck unless the history table has every
// history column with its type, no column of the operator's that an INSERT
// would have to fill, and this role may INSERT and SELECT (and DELETE, when
// $2 says old runs are pruned). $1 is the quoted history table.
var historyShapeCheck = newHistoryShapeCheck()

func newHistoryShapeCheck() string {
	want := make([]string, len(historyColumns))
	names := make([]string, len(historyColumns))
	for i, c := range historyColumns {
		want[i] = "(" + quoteLiteral(c.name) + ", " + quoteLiteral(c.typ) + ")"
		names[i] = quoteLiteral(c.name)
	}
	return `SELECT CASE WHEN c.relkind = 'r'
  AND (SELECT count(*) FROM pg_catalog.pg_attribute a
    JOIN (VALUES ` + strings.Join(want, ", ") + `) AS w(name, typ) ON w.name = a.attname::text
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      AND pg_catalog.format_type(a.atttypid, a.atttypmod) = w.typ) = ` + strconv.Itoa(len(historyColumns)) + `
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull
      AND NOT (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '')
      AND a.attname::text <> ALL (ARRAY[` + strings.Join(names, ", ") + `]))
  AND pg_catalog.has_table_privilege(c.oid, 'INSERT') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
  AND (NOT $2::boolean OR pg_catalog.has_table_privilege(c.oid, 'DELETE'))
THEN true
ELSE pg_catalog.current_setting('leasewrap: the history table needs a catalog check')::boolean END
FROM pg_catalog.pg_class c WHERE c.oid = $1::text::regclass`
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// batcher is what *pgxpool.Pool and *pgx.Conn offer for pipelines.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// take runs the single-slot take (see acquireSQL) with args, scanning its
// row into dest: with the shape checks in front until the Store's tables
// are known to be right, and through ensureSchema when that fails (see
// above). checkErr is ensureSchema's error, to be returned as it is (a
// *SchemaError, say); err is the take's.
func (s *Store) take(ctx context.Context, db DB, args, dest []any) (checkErr, err error) {
	if s.checked.Load() == nil {
		if b, ok := db.(batcher); ok {
			h := s.historyStatements(s.cfg.historyKeep > 0)
			err := s.takeChecked(ctx, b, h, args, dest)
			if err == nil || errors.Is(err, pgx.ErrNoRows) {
				// A slow path that finished meanwhile knows more.
				s.checked.CompareAndSwap(nil, &tablesChecked{hist: h})
				return nil, err
			}
			// A refusal that the catalog does not explain may still be
			// the history's (a trigger or constraint of the operator's):
			// the slow path tells.
			if !needsCatalog(err) && (retryable(err) || ctx.Err() != nil) {
				return nil, err
			}
		}
		// ensureSchema decides, too, whether runs are recorded: a history
		// table that failed its shape check is not written to, and the
		// take goes on without it.
		if err := s.ensureSchema(ctx); err != nil {
			return err, nil
		}
	}
	h := s.hist()
	if h == nil {
		return nil, db.QueryRow(ctx, s.sql.acquire, args...).Scan(dest...)
	}
	// A history table changed under a running instance must not keep it
	// from taking the lease: the take is tried again without it.
	err = db.QueryRow(ctx, h.acquire, args...).Scan(dest...)
	return nil, s.withoutHistory(ctx, err, func() error {
		return db.QueryRow(ctx, s.sql.acquire, args...).Scan(dest...)
	})
}

// takeChecked sends the shape checks of both tables and the take that also
// records runs in one pipeline. The history check also asks for the
// privileges recording and pruning need; without them, the catalog decides.
func (s *Store) takeChecked(ctx context.Context, b batcher, h *historyStatements, args, dest []any) error {
	batch := &pgx.Batch{}
	batch.Queue(shapeCheck, s.table.Sanitize(), s.checkFunction().Sanitize()+"(text,bigint,text)")
	batch.Queue(historyShapeCheck, s.history.Sanitize(), h.prune)
	batch.Queue(h.acquire, args...)
	br := b.SendBatch(ctx, batch)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	// Close reads up to the end of the implicit transaction: a failed
	// commit must not pass for a lease.
	if cerr := br.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		return cerr
	}
	return err
}

// look reads job's lease without writing: a plain SELECT, which takes no
// transaction id and locks nothing, where the acquire's INSERT ... ON
// CONFLICT would lock the row and take one even when it takes nothing. It
// returns a *HeldError while the lease is live, and nil when it is free,
// expired or has no row: then it is worth trying to take.
func (s *Store) look(ctx context.Context, db DB, job string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TTL-s.cfg.StopBefore())
	defer cancel()
	e, err := s.readHolder(ctx, db, job)
	if err != nil {
		s.cfg.observer.Failed(err)
		return err
	}
	s.cfg.observer.Contacted()
	if e.ExpiresIn <= 0 {
		return nil
	}
	return e
}

// lookThenTake tries to take job's lease only when a look finds it free.
func (s *Store) lookThenTake(ctx context.Context, db DB, job string) (*Lease, error) {
	// A look reads one row; a job of several slots is read, and taken, by
	// the slot statement itself.
	if s.cfg.slots > 1 {
		return s.tryAcquire(ctx, db, job)
	}
	if err := s.look(ctx, db, job); err != nil {
		return nil, err
	}
	return s.tryAcquire(ctx, db, job)
}
