package inspect_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// A Reader cannot write: what it asks of the database is queries only, and
// it offers nothing but questions.
func TestReaderHasNoWayToWrite(t *testing.T) {
	methods := func(typ reflect.Type) (names []string) {
		for i := range typ.NumMethod() {
			names = append(names, typ.Method(i).Name)
		}
		return names
	}
	if got := methods(reflect.TypeFor[inspect.DB]()); !slices.Equal(got, []string{"Query", "QueryRow"}) {
		t.Errorf("inspect.DB has %v, want only Query and QueryRow", got)
	}
	want := []string{"Freshness", "History", "Output", "Scheduled", "Status", "Summaries", "Summary"}
	if got := methods(reflect.TypeFor[*inspect.Reader]()); !slices.Equal(got, want) {
		t.Errorf("*inspect.Reader has %v, want only the questions %v", got, want)
	}
}

// Every question of a Reader runs in a read-only session, on an empty
// schema and on a populated one, and changes no object of the schema.
func TestReaderRunsReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.Pool(t)
	schema := pgtest.Table(t, admin)
	quotedSchema := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+quotedSchema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), `DROP SCHEMA `+quotedSchema+` CASCADE`) })
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	ro, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ro.Close)
	objects := func() (n int) {
		if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = $1::regnamespace)
  + (SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = $1::regnamespace)`, quotedSchema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	table := schema + ".lease"
	r, err := inspect.Open(ro, table)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() []error {
		_, serr := r.Status(ctx, "")
		_, herr := r.History(ctx, inspect.HistoryQuery{})
		_, ferr := r.Freshness(ctx, "job")
		_, uerr := r.Summaries(ctx, time.Hour)
		_, _, _, oerr := r.Output(ctx, inspect.OutputQuery{Job: "job"})
		if errors.Is(oerr, inspect.ErrNoOutput) {
			oerr = nil // the run kept none; the question was answered
		}
		_, derr := r.Scheduled(ctx, "job", time.Now())
		return []error{serr, herr, ferr, uerr, oerr, derr}
	}
	for i, err := range ask() {
		if !errors.Is(err, inspect.ErrNoTable) {
			t.Errorf("question %d on an empty schema: %v, want ErrNoTable", i+1, err)
		}
	}
	if n := objects(); n != 0 {
		t.Fatalf("the questions created %d objects in an empty schema", n)
	}

	s, err := lease.New(admin, lease.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	if err := l.Release(ctx, &code); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, "scheduled", "@every 1h", nil); err != nil { // creates the claims table
		t.Fatal(err)
	}
	before := objects()
	for i, err := range ask() {
		if err != nil {
			t.Errorf("question %d in a read-only session: %v", i+1, err)
		}
	}
	if after := objects(); after != before {
		t.Errorf("the questions changed the schema's objects: %d before, %d after", before, after)
	}
}

// A role that may not read the lease table is told it lacks a privilege,
// not that the database is down: the error matches lease.ErrPermission.
func TestStatusWithoutPrivilegeSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.Pool(t)
	table := pgtest.Table(t, admin)
	s, err := lease.New(admin, lease.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	role := table + "_nobody"
	r := pgx.Identifier{role}.Sanitize()
	if _, err := admin.Exec(ctx, `CREATE ROLE `+r+` LOGIN`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		admin.Exec(context.Background(), `DROP OWNED BY `+r+`; DROP ROLE `+r)
	})
	if _, err := lwtest.Reader(t, pool, table).Status(ctx, ""); !errors.Is(err, lease.ErrPermission) {
		t.Errorf("status without SELECT: %v, want an error matching ErrPermission", err)
	}
}
