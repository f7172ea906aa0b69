package command

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// With no connection string, the PG* variables pick the database: the logs
// say which one, at debug on every start and at info when a table is
// created there. No password is among what they name.
func TestLogsNameTheDatabase(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := d.pool.Config().ConnConfig
	host := cfg.Host + ":" + strconv.Itoa(int(cfg.Port))
	env := []string{"LEASEWRAP_DATABASE_URL=", "DATABASE_URL=", "PGHOST=" + cfg.Host, "PGPORT=" + strconv.Itoa(int(cfg.Port)),
		"PGUSER=" + cfg.User, "PGDATABASE=" + cfg.Database, "PGSSLMODE=disable"}
	p := lw(t, env, "--table", d.table, "--log-format", "json", "--log-level", "debug", "--job", "j", "--", "true")
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d: %s", code, p.Logs)
	}
	if e := p.WaitLog(t, "lease database"); e["level"] != "debug" || e["database"] != host || e["database_name"] != cfg.Database {
		t.Errorf("start: %v, want database %s and database_name %s at debug", e, host, cfg.Database)
	}
	created := false
	for _, e := range p.LogEntries(t) {
		if msg, _ := e["message"].(string); strings.HasPrefix(msg, "created table") {
			created = true
			if e["level"] != "info" || e["database"] != host || e["database_name"] != cfg.Database {
				t.Errorf("%v: want database %s and database_name %s at info", e, host, cfg.Database)
			}
		}
	}
	if !created {
		t.Errorf("no \"created table\" line in %s", p.Logs)
	}

	// The server's default database is the user's name: said as such.
	p = lw(t, nil, "--database-url", "postgres://alice:pw-42@127.0.0.1:1?sslmode=disable", "--log-format", "json",
		"--log-level", "debug", "--job", "j", "--", "true")
	p.Wait(t, 15*time.Second)
	if e := p.WaitLog(t, "lease database"); e["database_name"] != "alice" || e["database"] != "127.0.0.1:1" {
		t.Errorf("start without a database name: %v, want database_name alice at 127.0.0.1:1", e)
	}
	if e := p.WaitLog(t, "lease store unavailable"); e["database_name"] != "alice" {
		t.Errorf("unavailable: %v, want database_name alice", e)
	}
	if strings.Contains(p.Logs.String(), "pw-42") {
		t.Errorf("password in %s", p.Logs)
	}

	// migrate says each change once, on stdout, and where it made them
	// once, on stderr.
	d2 := newDB(t)
	m := lw(t, nil, "migrate", "--database-url", pgtest.URL(), "--table", d2.table, "--log-format", "json")
	createdLine := "created table " + `"` + d2.table + `"`
	m.Expect(t, createdLine)
	if code := m.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("migrate exit %d: %s", code, m.Logs)
	}
	if e := m.WaitLog(t, "lease tables migrated"); e["database_name"] != cfg.Database || e["table"] != d2.table {
		t.Errorf("migrate: %v, want database_name %s and table %s", e, cfg.Database, d2.table)
	}
	if strings.Contains(m.Logs.String(), createdLine) {
		t.Errorf("migrate said %q on stderr too: %s", createdLine, m.Logs)
	}
}
