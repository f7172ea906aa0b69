package command

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
)

const noDatabaseNamed = "no database named: give --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL), or set PGHOST, PGDATABASE or PGSERVICE"

// runBare runs leasewrap with exactly env (and no race detector delay at
// exit), as `env -i` would, and returns its status and what it printed.
func runBare(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{testchild.NoRaceExitDelay}, env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("leasewrap %q still running after 20s", args)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// With nothing naming a database, no command coordinates through libpq's
// default (the local socket and a database named after the user, a
// different one on each host): each refuses with one line, 64 (check: 3,
// UNKNOWN), runs nothing and creates nothing, not even in the default
// database when there is one here. PGUSER, PGPORT and the like do not name
// a database; neither does PGHOSTADDR, which pgx does not read.
func TestNoDatabaseNamedIsRefused(t *testing.T) {
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "record")
	// What leasewrap's environment leaves to the default, for looking into
	// the default database below as leasewrap would have found it.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PG") || strings.HasSuffix(name, "DATABASE_URL") {
			t.Setenv(name, "")
		}
	}
	notNaming := []string{"PGUSER=" + d.pool.Config().ConnConfig.User, "PGPORT=" + strconv.Itoa(int(d.pool.Config().ConnConfig.Port)),
		"PGSSLMODE=disable", "PGHOSTADDR=127.0.0.1", "PGSERVICEFILE=" + filepath.Join(t.TempDir(), "none"),
		"LEASEWRAP_DATABASE_URL=", "DATABASE_URL="}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
	}{
		{"run in an empty environment", []string{lwtest.Child("record:" + record)}, []string{"--job", "j", "--", self()}, cmdutil.ExitUsage},
		{"run", append([]string{lwtest.Child("record:" + record)}, notNaming...), []string{"--job", "j", "--", self()}, cmdutil.ExitUsage},
		{"run with a schedule", append([]string{lwtest.Child("record:" + record)}, notNaming...),
			[]string{"--job", "j", "--schedule", "@every 1s", "--", self()}, cmdutil.ExitUsage},
		{"migrate", notNaming, []string{"migrate"}, cmdutil.ExitUsage},
		{"status", notNaming, []string{"status"}, cmdutil.ExitUsage},
		{"history", notNaming, []string{"history"}, cmdutil.ExitUsage},
		{"check", notNaming, []string{"check", "--job", "j"}, 3},
		{"exporter", notNaming, []string{"exporter", "--http-addr", "127.0.0.1:0"}, cmdutil.ExitUsage},
		{"release", notNaming, []string{"release", "--job", "j", "--force", "--yes"}, cmdutil.ExitUsage},
		{"trigger", notNaming, []string{"trigger", "--job", "j"}, cmdutil.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runBare(t, tc.env, append([]string{"--table", d.table}, tc.args...)...)
			if code != tc.code || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, noDatabaseNamed+"\n") {
				t.Errorf("exit %d, %q; want %d and the one line %q", code, out, tc.code, noDatabaseNamed)
			}
		})
	}
	if runs := readHistory(t, record); len(runs) != 0 {
		t.Errorf("the command ran %d times", len(runs))
	}
	// The default databases of the two environments above.
	notCreatedIn(t, d.table)
	t.Setenv("PGUSER", d.pool.Config().ConnConfig.User)
	t.Setenv("PGPORT", strconv.Itoa(int(d.pool.Config().ConnConfig.Port)))
	notCreatedIn(t, d.table)
}

// notCreatedIn checks that libpq's default database, as this process's
// environment makes it, has no table named table or table_history; a
// default that cannot be reached can have nothing written to it.
func notCreatedIn(t *testing.T, table string) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		t.Logf("libpq's default database cannot be reached here, so nothing could be written to it: %v", err)
		return
	}
	defer conn.Close(context.Background())
	var found []string
	if err := conn.QueryRow(ctx, `SELECT array_remove(ARRAY[to_regclass($1)::text, to_regclass($2)::text], NULL)`,
		pgx.Identifier{table}.Sanitize(), pgx.Identifier{table + "_history"}.Sanitize()).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("created %v in libpq's default database (user %q, database %q)", found, cfg.ConnConfig.User, cfg.ConnConfig.Database)
	}
}

// Each way of naming a database is enough: a connection string, PGHOST,
// PGDATABASE (on the default host: here a port nobody listens on, so the
// run gets as far as connecting, and 69), or a service.
func TestEachWayOfNamingADatabase(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := d.pool.Config().ConnConfig
	port := strconv.Itoa(int(cfg.Port))
	service := filepath.Join(t.TempDir(), "pg_service.conf")
	if err := os.WriteFile(service, []byte("[leasewrap_test]\nhost="+cfg.Host+"\nport="+port+"\nuser="+cfg.User+
		"\ndbname="+cfg.Database+"\nsslmode=disable\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		code int
	}{
		{"LEASEWRAP_DATABASE_URL", []string{"LEASEWRAP_DATABASE_URL=" + pgtest.URL()}, 0},
		{"DATABASE_URL", []string{"DATABASE_URL=" + pgtest.URL()}, 0},
		{"PGHOST", []string{"PGHOST=" + cfg.Host, "PGPORT=" + port, "PGUSER=" + cfg.User, "PGDATABASE=" + cfg.Database, "PGSSLMODE=disable"}, 0},
		{"PGSERVICE", []string{"PGSERVICE=leasewrap_test", "PGSERVICEFILE=" + service}, 0},
		{"PGDATABASE", []string{"PGDATABASE=" + cfg.Database, "PGPORT=1", "PGCONNECT_TIMEOUT=2"}, cmdutil.ExitUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "record")
			code, out := runBare(t, append(tc.env, lwtest.Child("record:"+record)),
				"--job", tc.name, "--table", d.table, "--log-format", "json", "--", self())
			if code != tc.code || strings.Contains(out, "no database named") {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			if runs := readHistory(t, record); tc.code == 0 && len(runs) != 1 {
				t.Errorf("the command ran %d times, want once", len(runs))
			}
		})
	}
}
