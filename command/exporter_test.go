package command

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
)

// exporter starts `leasewrap exporter` on a free port for d's table, as
// dsn's role, and returns it with the address it logged.
func (d db) exporter(t *testing.T, dsn string) (*lwtest.Proc, string) {
	t.Helper()
	p := lw(t, nil, "exporter", "--database-url", dsn, "--table", d.table, "--log-format", "json", "--http-addr", "127.0.0.1:0")
	return p, p.WaitLog(t, "serving the web page, /metrics and /healthz")["http_addr"].(string)
}

// scrape reads /metrics into series (name with labels, as exposed) and
// values.
func scrape(t *testing.T, addr string) map[string]string {
	t.Helper()
	code, body := get(t, addr, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d: %s", code, body)
	}
	series := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			series[line[:i]] = line[i+1:]
		}
	}
	return series
}

// waitSeries polls /metrics until every series in want has its value ("" for
// a series that must be absent), and returns the last scrape.
func waitSeries(t *testing.T, addr string, want map[string]string) map[string]string {
	t.Helper()
	var got map[string]string
	var wrong string
	window := stall.Open()
	for {
		got, wrong = scrape(t, addr), ""
		for s, v := range want {
			if have, ok := got[s]; v == "" && ok || v != "" && have != v {
				wrong = fmt.Sprintf("%s = %q, want %q", s, have, v)
				break
			}
		}
		if wrong == "" {
			return got
		}
		if !window.Within(10 * time.Second) {
			t.Fatalf("metrics never showed %s (10s, +%s stalled); last scrape:\n%s", wrong, window.Stalled(), jobSeries(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// jobSeries lists the exporter's own series, for failure messages.
func jobSeries(m map[string]string) string {
	var b strings.Builder
	for s, v := range m {
		if strings.HasPrefix(s, "leasewrap_") {
			fmt.Fprintf(&b, "%s %s\n", s, v)
		}
	}
	return b.String()
}

// runJob runs job once with a child that exits with code, and waits for
// the wrapper to exit with it.
func (d db) runJob(t *testing.T, job string, code int) {
	t.Helper()
	p := lw(t, []string{child("exit:" + strconv.Itoa(code))}, d.args("--job", job, "--id", "runner", "--", self())...)
	if got := p.Wait(t, 15*time.Second); got != code {
		t.Fatalf("job %s exited %d, want %d", job, got, code)
	}
}

func seconds(t *testing.T, v string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("not a number: %q", v)
	}
	return f
}

// The exporter refuses to start without a lease table and creates none,
// then follows runs as they happen: a success, a failure, a job that never
// succeeded, a held lease and its release.
func TestExporterFollowsRuns(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	// No table yet: one line naming it, exit 69, the database left alone.
	p := lw(t, nil, "exporter", "--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--http-addr", "127.0.0.1:0")
	if got := p.Wait(t, 10*time.Second); got != 69 || !strings.Contains(p.Logs.String(), "no lease table") {
		t.Errorf("exporter without a lease table exited %d, want 69 naming the table: %s", got, p.Logs)
	}
	var exists bool
	if err := d.pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL OR to_regclass($2) IS NOT NULL`,
		pgx.Identifier{d.table}.Sanitize(), pgx.Identifier{d.table + "_history"}.Sanitize()).Scan(&exists); err != nil || exists {
		t.Fatalf("the exporter created a table (%v)", err)
	}

	d.runJob(t, "flip", 0)
	exp, addr := d.exporter(t, pgtest.URL())
	d.runJob(t, "broken", 3)
	m := waitSeries(t, addr, map[string]string{
		"leasewrap_exporter_up":                                        "1",
		`leasewrap_job_last_exit_code{lease="flip"}`:                   "0",
		`leasewrap_job_last_exit_code{lease="broken"}`:                 "3",
		`leasewrap_job_runs{lease="flip",outcome="exited"}`:            "1",
		`leasewrap_job_runs{lease="broken",outcome="exited"}`:          "1",
		`leasewrap_job_runs{lease="broken",outcome="lost"}`:            "0",
		`leasewrap_job_last_success_timestamp_seconds{lease="broken"}`: "", // never succeeded
		`leasewrap_job_lease_held{lease="flip"}`:                       "0",
		`leasewrap_job_slots_held{lease="flip"}`:                       "0",
		`leasewrap_job_slots{lease="flip"}`:                            "1",
	})
	firstSuccess := seconds(t, m[`leasewrap_job_last_success_timestamp_seconds{lease="flip"}`])
	if now := float64(time.Now().UnixMicro()) / 1e6; firstSuccess < now-60 || firstSuccess > now+60 {
		t.Errorf("last success %f is not about now (%f)", firstSuccess, now)
	}
	if m[`leasewrap_job_last_run_timestamp_seconds{lease="broken"}`] == "" {
		t.Error("no last run for the job that failed")
	}

	// The job fails next: the last run moves on, the last success stays.
	d.runJob(t, "flip", 3)
	m = waitSeries(t, addr, map[string]string{
		`leasewrap_job_last_exit_code{lease="flip"}`:        "3",
		`leasewrap_job_runs{lease="flip",outcome="exited"}`: "2",
	})
	if got := seconds(t, m[`leasewrap_job_last_success_timestamp_seconds{lease="flip"}`]); got != firstSuccess {
		t.Errorf("last success moved from %f to %f on a failed run", firstSuccess, got)
	}
	if got := seconds(t, m[`leasewrap_job_last_run_timestamp_seconds{lease="flip"}`]); got <= firstSuccess {
		t.Errorf("last run %f is not after the first success %f", got, firstSuccess)
	}

	// A lease held now, by a job that has not finished a run yet.
	held := lw(t, []string{child("trap ready block")}, d.args("--job", "held", "--id", "h1", "--", self())...)
	held.Expect(t, "ready")
	waitSeries(t, addr, map[string]string{
		`leasewrap_job_lease_held{lease="held"}`:                 "1",
		`leasewrap_job_slots_held{lease="held"}`:                 "1",
		`leasewrap_job_holder_info{holder="h1",lease="held"}`:    "1",
		`leasewrap_job_last_exit_code{lease="held"}`:             "-1",
		`leasewrap_job_last_run_timestamp_seconds{lease="held"}`: "",
	})
	if err := held.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	held.Wait(t, 15*time.Second)
	m = waitSeries(t, addr, map[string]string{
		`leasewrap_job_lease_held{lease="held"}`:              "0",
		`leasewrap_job_holder_info{holder="h1",lease="held"}`: "",
	})
	if m[`leasewrap_job_last_run_timestamp_seconds{lease="held"}`] == "" {
		t.Error("the run that was stopped is not the last run")
	}
	if m["leasewrap_exporter_scrape_duration_seconds"] == "" || m["go_goroutines"] == "" {
		t.Error("no scrape duration or Go runtime series")
	}

	// HEAD answers (curl -I), and /healthz is up.
	client := &http.Client{Timeout: 2 * time.Second}
	for _, path := range []string{"/metrics", "/healthz"} {
		resp, err := client.Head("http://" + addr + path)
		if err != nil {
			t.Fatalf("HEAD %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("HEAD %s: %d", path, resp.StatusCode)
		}
	}

	// SIGTERM stops it cleanly.
	if err := exp.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := exp.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("exporter exited %d on SIGTERM, want 0", got)
	}
}

// A job with two slots, both held, shows both holders.
func TestExporterSlots(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, id := range []string{"s1", "s2"} {
		p := lw(t, []string{child("trap ready block")}, d.args("--job", "pool", "--slots", "2", "--id", id, "--", self())...)
		p.Expect(t, "ready")
	}
	_, addr := d.exporter(t, pgtest.URL())
	waitSeries(t, addr, map[string]string{
		"leasewrap_exporter_up":                               "1",
		`leasewrap_job_lease_held{lease="pool"}`:              "1",
		`leasewrap_job_slots_held{lease="pool"}`:              "2",
		`leasewrap_job_slots{lease="pool"}`:                   "2",
		`leasewrap_job_holder_info{holder="s1",lease="pool"}`: "1",
		`leasewrap_job_holder_info{holder="s2",lease="pool"}`: "1",
		`leasewrap_job_lease_held{lease="pool#2"}`:            "", // slot rows are counted under their job
	})
}

var roleSeq atomic.Int64

// readOnlyRole creates a role that may only SELECT from d's two tables and
// whose transactions are read-only, and returns a connection string for
// it. It is dropped when the test ends.
func (d db) readOnlyRole(t *testing.T) string {
	t.Helper()
	role := fmt.Sprintf("lw_ro_%d_%d", os.Getpid(), roleSeq.Add(1))
	r := pgx.Identifier{role}.Sanitize()
	d.exec(t, `CREATE ROLE `+r+` LOGIN`)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := d.pool.Exec(ctx, `DROP OWNED BY `+r+`; DROP ROLE `+r); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	d.exec(t, `ALTER ROLE `+r+` SET default_transaction_read_only = on`)
	d.exec(t, `GRANT USAGE ON SCHEMA public TO `+r)
	d.exec(t, `GRANT SELECT ON TABLE, `+pgx.Identifier{d.table + "_history"}.Sanitize()+` TO `+r)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// The exporter needs nothing but SELECT: as a role that may do nothing
// else, in read-only transactions, it reports every series.
func TestExporterReadOnlyRole(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.runJob(t, "nightly", 0)
	d.runJob(t, "nightly", 2)
	_, addr := d.exporter(t, d.readOnlyRole(t))
	waitSeries(t, addr, map[string]string{
		"leasewrap_exporter_up":                                "1",
		`leasewrap_job_last_exit_code{lease="nightly"}`:        "2",
		`leasewrap_job_runs{lease="nightly",outcome="exited"}`: "2",
		`leasewrap_job_lease_held{lease="nightly"}`:            "0",
	})
	if m := scrape(t, addr); m[`leasewrap_job_last_success_timestamp_seconds{lease="nightly"}`] == "" {
		t.Error("no last success")
	}
}

// Bad settings are usage errors; a port in use cannot be served.
func TestExporterExitCodes(t *testing.T) {
	t.Parallel()
	code, _, errOut := runInProcess(t, nil, "exporter", "--http-addr", "nope")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut, `invalid --http-addr "nope"`) {
		t.Errorf("bad address: exit %d, %q", code, errOut)
	}
	d := newDB(t)
	d.runJob(t, "nightly", 0)
	_, addr := d.exporter(t, pgtest.URL())
	p := lw(t, nil, "exporter", "--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--http-addr", addr)
	if got := p.Wait(t, 10*time.Second); got != cmdutil.ExitUsage {
		t.Errorf("port in use: exit %d, want %d", got, cmdutil.ExitUsage)
	}
}
