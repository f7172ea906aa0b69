package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

var update = flag.Bool("update", false, "rewrite the files that testdata/script's cmp commands compare with")

// TestMain lets the test binary be leasewrap itself: testscript puts a copy
// of it in $PATH named leasewrap, and run is what main runs.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"leasewrap": func() { os.Exit(run()) }})
}

// TestScripts runs the end-to-end scenarios in testdata/script, one
// subtest per file, each on lease tables of its own in the test database
// (LEASEWRAP_TEST_DATABASE_URL): LEASEWRAP_DATABASE_URL and LEASEWRAP_TABLE
// are set for it, and its logs are in the console format. Besides
// testscript's commands, the scripts have
//
//	exits STATUS COMMAND [ARG...]
//
// which runs COMMAND as exec does and fails unless it exits with STATUS,
// and the variable $db, the database's URL, for a leasewrap that a
// wrapped command runs (leasewrap takes LEASEWRAP_DATABASE_URL out of its
// command's environment).
func TestScripts(t *testing.T) {
	pool := pgtest.Pool(t)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update,
		Setup: func(env *testscript.Env) error {
			table, err := scriptTable(env.WorkDir)
			if err != nil {
				return err
			}
			// After the script's background processes have ended (they
			// end after env.Defer's functions run): a scheduler left
			// running would make the tables again.
			env.T().(interface{ Cleanup(func()) }).Cleanup(func() { dropLeaseTables(env.T(), pool, table) })
			env.Setenv("LEASEWRAP_DATABASE_URL", pgtest.URL())
			env.Setenv("LEASEWRAP_TABLE", table)
			env.Setenv("LEASEWRAP_LOG_FORMAT", "console")
			env.Setenv("db", pgtest.URL())
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"exits": exits},
	})
}

// scriptTable names the lease table of the script whose work directory
// is workDir ("script-run"): lw_script_run_ and a random suffix, so that
// runs of the tests at once never share one.
func scriptTable(workDir string) (string, error) {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", err
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(filepath.Base(workDir)))
	return "lw_" + name + "_" + hex.EncodeToString(suffix[:]), nil
}

// dropLeaseTables drops what leasewrap created for the lease table table:
// its history and claims tables and its own functions, which DROP TABLE
// leaves behind (docs/operations.md), not the schema's leasewrap_check,
// which every lease table of the schema shares.
func dropLeaseTables(t testscript.T, pool *pgxpool.Pool, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease := pgx.Identifier{table}
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+lease.Sanitize()+", "+
		schema.HistoryTable(lease).Sanitize()+", "+schema.ClaimsTable(lease).Sanitize()); err != nil {
		t.Fatal("drop the tables of "+table+":", err)
	}
	rows, err := pool.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace AND starts_with(p.proname, $1 || '_')`, table)
	if err == nil {
		var functions []string
		if functions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			for _, f := range functions {
				if _, err = pool.Exec(ctx, "DROP FUNCTION IF EXISTS "+f); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		t.Fatal("drop the functions of "+table+":", err)
	}
}

// exits is the script command "exits STATUS COMMAND [ARG...]" (see
// TestScripts): testscript's exec tells success from failure, not one
// status from another.
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits STATUS COMMAND [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: status %q is not a number", args[0])
	}
	got := 0
	var exit *exec.ExitError
	switch err := ts.Exec(args[1], args[2:]...); {
	case errors.As(err, &exit):
		got = exit.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}
