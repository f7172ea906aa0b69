package lease

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// statements holds the SQL for one table. The table name is quoted once with
// pgx.Identifier.Sanitize; every value is a bind parameter.
type statements struct {
	acquire, holder, renew, release string
}

// A lease is live while expires_at > now(); all times come from the database
// clock. Durations are passed in microseconds.
func newStatements(table string) statements {
	return statements{
		// Takes a free or expired row; a live one (even our own id's) is left
		// alone, so RETURNING gives no row. The token rises on every take.
		acquire: `INSERT INTO ` + table + ` AS l
  (job_name, holder, expires_at, fencing_token, acquired_at, renewed_at, last_started_at, last_holder)
VALUES ($1::text, $2::text, now() + $3::bigint * interval '1 microsecond', 1, now(), now(), now(), $2)
ON CONFLICT (job_name) DO UPDATE SET
  holder = excluded.holder,
  expires_at = excluded.expires_at,
  fencing_token = l.fencing_token + 1,
  acquired_at = now(),
  renewed_at = now(),
  last_started_at = now(),
  last_finished_at = NULL,
  last_exit_code = NULL,
  last_holder = excluded.holder
WHERE l.expires_at <= now()
RETURNING fencing_token`,

		holder: `SELECT holder,
  (extract(epoch FROM expires_at - now()) * 1000000)::bigint,
  fencing_token
FROM ` + table + ` WHERE job_name = $1::text`,

		renew: `UPDATE ` + table + ` SET
  expires_at = now() + $4::bigint * interval '1 microsecond',
  renewed_at = now()
WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint`,

		release: `UPDATE ` + table + ` SET
  expires_at = greatest(now(), acquired_at + $4::bigint * interval '1 microsecond'),
  last_finished_at = now(),
  last_exit_code = $5::integer
WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint`,
	}
}

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
}

// schemaLockKey serialises leasewrap's DDL across all instances: concurrent
// CREATE TABLE IF NOT EXISTS can fail on the catalog's unique indexes.
const schemaLockKey int64 = 0x6c656173657772 // "leaswr"

// Migrate creates the lease table or adds the columns it lacks, and returns
// one line per change made (none when the table was already complete). It is
// safe to run from many instances at once.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	missing, exists, err := s.missingColumns(ctx, s.db)
	if err != nil {
		return nil, err
	}
	if exists && len(missing) == 0 {
		return nil, nil
	}
	changes, err := s.migrateLocked(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot create or upgrade lease table %s: %w", s.table.Sanitize(), err)
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
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
		return nil, err
	}
	missing, exists, err := s.missingColumns(ctx, tx)
	if err != nil {
		return nil, err
	}
	table := s.table.Sanitize()
	var changes []string
	if !exists {
		defs := make([]string, len(columns))
		for i, c := range columns {
			defs[i] = pgx.Identifier{c.name}.Sanitize() + " " + c.def
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+table+" (\n  "+strings.Join(defs, ",\n  ")+"\n)"); err != nil {
			return nil, err
		}
		changes = append(changes, "created table "+table)
	} else if len(missing) > 0 {
		adds := make([]string, len(missing))
		for i, c := range missing {
			adds[i] = "ADD COLUMN IF NOT EXISTS " + pgx.Identifier{c}.Sanitize() + " " + columnDef(c)
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" "+strings.Join(adds, ", ")); err != nil {
			return nil, err
		}
		changes = append(changes, fmt.Sprintf("upgraded table %s: added %s", table, strings.Join(missing, ", ")))
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
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// missingColumns looks the table up in the catalog without locking it.
func (s *Store) missingColumns(ctx context.Context, q queryer) (missing []string, exists bool, err error) {
	rows, err := q.Query(ctx, `SELECT a.attname::text FROM pg_catalog.pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, s.table.Sanitize())
	if err != nil {
		return nil, false, fmt.Errorf("cannot look up lease table %s: %w", s.table.Sanitize(), err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("cannot look up lease table %s: %w", s.table.Sanitize(), err)
	}
	present := make(map[string]bool, len(have))
	for _, name := range have {
		present[name] = true
	}
	for _, c := range columns {
		if !present[c.name] {
			missing = append(missing, c.name)
		}
	}
	return missing, len(have) > 0, nil
}
