package schema_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

// The catalog check (Read) and the shape check a first take sends in front
// of itself come from one description of each table: for every table
// below, the shape check passes exactly when Read finds a lease table that
// needs nothing.
func TestShapeCheckAgreesWithRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	complete := `job_name text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL,
  fencing_token bigint NOT NULL DEFAULT 0, acquired_at timestamptz, renewed_at timestamptz, last_started_at timestamptz,
  last_finished_at timestamptz, last_exit_code integer, last_holder text, released_at timestamptz, slot integer, slots integer,
  schedule text, last_scheduled_at timestamptz, accounted_through timestamptz, schedule_zone text, scheduled_since timestamptz,
  paused_until timestamptz, paused_at timestamptz, paused_by text, pause_reason text, queue jsonb, released_by text`
	for _, tc := range []struct {
		name, columns string
		after         string // run once the table is there ({t} is its name)
		ready         bool
	}{
		{"complete", complete, "", true},
		{"complete with a note", complete + ", note text", "", true},
		{"minimal", "job_name text PRIMARY KEY, holder text, expires_at timestamptz", "", false},
		{"timestamp without time zone", "job_name text PRIMARY KEY, holder text NOT NULL, expires_at timestamp NOT NULL", "", false},
		{"extra NOT NULL column", complete + ", owner text NOT NULL", "", false},
		{"extra NOT NULL column with a default", complete + ", owner text NOT NULL DEFAULT 'ops'", "", true},
		{"NOT NULL on a column leasewrap clears", complete, "ALTER TABLE {t} ALTER COLUMN released_at SET NOT NULL", false},
		{"primary key on two columns", "job_name text, holder text NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (job_name, holder)", "", false},
		{"primary key on another column", "job_name text NOT NULL UNIQUE, holder text PRIMARY KEY" + complete[len("job_name text PRIMARY KEY, holder text NOT NULL"):], "", false},
		{"no key", "job_name text NOT NULL, holder text NOT NULL, expires_at timestamptz NOT NULL", "", false},
		{"unique index instead of a primary key", "job_name text NOT NULL UNIQUE" + complete[len("job_name text PRIMARY KEY"):], "", true},
		{"deferrable unique constraint", "job_name text NOT NULL UNIQUE DEFERRABLE" + complete[len("job_name text PRIMARY KEY"):], "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nsp := pgtest.Table(t, pool)
			q := pgx.Identifier{nsp}.Sanitize()
			if _, err := pool.Exec(ctx, `CREATE SCHEMA `+q); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pool.Exec(context.Background(), `DROP SCHEMA `+q+` CASCADE`) })
			o := schema.For(pgx.Identifier{nsp, "lease"})
			// Migrate creates the history table and the function beside
			// the table under test, which is then replaced.
			if _, _, err := o.Migrate(ctx, pool); err != nil {
				t.Fatal(err)
			}
			ddl := `DROP TABLE ` + o.Lease + `; CREATE TABLE ` + o.Lease + ` (` + tc.columns + `)`
			if tc.after != "" {
				ddl += "; " + strings.ReplaceAll(tc.after, "{t}", o.Lease)
			}
			if _, err := pool.Exec(ctx, ddl); err != nil {
				t.Fatal(err)
			}
			st, err := o.Read(ctx, pool)
			var mismatch *schema.Error
			if err != nil && !errors.As(err, &mismatch) {
				t.Fatal(err)
			}
			readReady := err == nil && st.TableComplete()
			b := &pgx.Batch{}
			o.QueueShapeChecks(b, false)
			br := pool.SendBatch(ctx, b)
			_, shapeErr := br.Exec()
			br.Close()
			if readReady != (shapeErr == nil) || readReady != tc.ready {
				t.Errorf("Read says ready %v (%v), the shape check %v; want both %v", readReady, err, shapeErr, tc.ready)
			}
		})
	}
}
