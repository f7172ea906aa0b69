package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// Three cron hosts whose clocks are 0, 1 and 2 seconds apart run a 200ms
// job: with --hold-for 5s only the first runs it; without, all three do.
func TestHoldForKeepsLateCronPeersOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		holdFor string
		runs    int
	}{{"5s", 1}, {"0s", 3}} {
		t.Run("hold-for "+tc.holdFor, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			history := filepath.Join(t.TempDir(), "history")
			for i := range 3 {
				if i > 0 {
					time.Sleep(time.Second) // the hosts' clocks are a second apart
				}
				p := lw(t, []string{child("record:" + history + " sleep:200ms")},
					d.args("--job", "report", "--hold-for", tc.holdFor, "--id", fmt.Sprint("host", i), "--", self())...)
				if got := p.Wait(t, 10*time.Second); got != 0 {
					t.Fatalf("host %d exited %d", i, got)
				}
			}
			if runs := readHistory(t, history); len(runs) != tc.runs {
				t.Errorf("%d runs, want %d: %+v", len(runs), tc.runs, runs)
			}
		})
	}
}

// A finished job whose lease --hold-for keeps is shown as kept, skips say
// so, and release explains how to end the hold.
func TestHoldForIsVisible(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	storeArgs := []string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--job", "report"}
	if got := lw(t, nil, d.args("--job", "report", "--id", "host-a", "--hold-for", "10m", "--", "true")...).Wait(t, 10*time.Second); got != 0 {
		t.Fatalf("first run exited %d", got)
	}
	skip := lw(t, nil, d.args("--job", "report", "--id", "host-b", "--", "true")...)
	if e := skip.WaitLog(t, "skipped: another instance ran the job and --hold-for keeps its lease"); e["state"] != "kept" {
		t.Errorf("skip logged %v", e)
	}
	st := lw(t, nil, append([]string{"status", "--json"}, storeArgs...)...)
	var out strings.Builder
	for line := range st.Lines {
		out.WriteString(line)
	}
	if !strings.Contains(out.String(), `"state": "kept"`) {
		t.Errorf("status --json: %s, want state kept", out.String())
	}
	rel := lw(t, nil, append([]string{"release", "--id", "host-a"}, storeArgs...)...)
	if got := rel.Wait(t, 10*time.Second); got != 1 || !strings.Contains(rel.Logs.String(), "add --force to end the hold now") {
		t.Errorf("release --id of a kept lease: exit %d, %q", got, rel.Logs)
	}
	if got := lw(t, nil, append([]string{"release", "--force"}, storeArgs...)...).Wait(t, 10*time.Second); got != 0 {
		t.Errorf("release --force of a kept lease exited %d, want 0 without --yes", got)
	}
	if in := d.expiresIn(t, "report"); in > 0 {
		t.Errorf("lease still kept for %s after release --force", in)
	}
}

func TestStatusShowsTheLastRun(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	storeArgs := []string{"--database-url", pgtest.URL(), "--table", d.table}
	p := lw(t, []string{child("exit:4")}, d.args("--job", "done", "--id", "host-a", "--", self())...)
	if got := p.Wait(t, 10*time.Second); got != 4 {
		t.Fatalf("exit %d", got)
	}
	running := lw(t, []string{child("ready block")}, d.args("--job", "running", "--id", "host-b", "--", self())...)
	running.Expect(t, "ready")

	st := lw(t, nil, append([]string{"status"}, storeArgs...)...)
	var table []string
	for line := range st.Lines {
		table = append(table, line)
	}
	if got := st.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("status exited %d", got)
	}
	if len(table) != 3 || !strings.HasPrefix(table[0], "JOB ") {
		t.Fatalf("status printed %q, want a header and two rows", table)
	}
	for i, want := range [][]string{{"done", "host-a", "released", "-", "4", "host-a"}, {"running", "host-b", "held", "running", "-", "host-b"}} {
		row := strings.Fields(table[i+1])
		for _, field := range want {
			if !slices.Contains(row, field) {
				t.Errorf("row %q lacks %q", table[i+1], field)
			}
		}
	}

	js := lw(t, nil, append([]string{"status", "--json", "--job", "done"}, storeArgs...)...)
	var out strings.Builder
	for line := range js.Lines {
		out.WriteString(line)
	}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(out.String()), &jobs); err != nil {
		t.Fatalf("status --json: %v in %q", err, out.String())
	}
	if len(jobs) != 1 || jobs[0]["state"] != "released" || jobs[0]["last_exit_code"] != float64(4) ||
		jobs[0]["fencing_token"].(float64) < 1e15 || jobs[0]["last_holder"] != "host-a" || jobs[0]["last_duration_seconds"] == nil {
		t.Errorf("status --json = %v", jobs)
	}

	missing := lw(t, nil, append([]string{"status", "--job", "nope"}, storeArgs...)...)
	if got := missing.Wait(t, 10*time.Second); got != 1 {
		t.Errorf("status of a missing job exited %d, want 1", got)
	}
}

func TestReleaseCommand(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	storeArgs := []string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--job", "j"}
	release := func(args ...string) *lwtest.Proc {
		return lw(t, nil, append(append([]string{"release"}, storeArgs...), args...)...)
	}
	p := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--id", "host-a", "--", self())...)
	p.Expect(t, "ready")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 64},                           // neither --id nor --force
		{[]string{"--id", "other-host"}, 1}, // not this id's lease
		{[]string{"--id", "other-host", "--force"}, 1}, // --force keeps to --id
		{[]string{"--force"}, 64},                      // a live holder: needs --yes
		{[]string{"--id", "host-a"}, 0},                // last: the holder stops at its next renewal
	} {
		if got := release(tc.args...).Wait(t, 10*time.Second); got != tc.want {
			t.Errorf("release %q exited %d, want %d", tc.args, got, tc.want)
		}
	}
	// Asked to give the lease back, the live holder stops its command at its
	// next renewal; the lease stays held until then, so nothing overlaps.
	if in := d.expiresIn(t, "j"); in <= 0 {
		t.Errorf("lease free while its holder's command still runs")
	}
	p.Expect(t, "signal SIGTERM")
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("holder exited %d after a release, want 75", got)
	}
	// A planned hand-over reads as one on the holder's side.
	if e := p.WaitLog(t, "lease lost"); e["level"] != "warn" {
		t.Errorf("holder logged %v, want a warning for an operator's release", e)
	}
	if in := d.expiresIn(t, "j"); in > 0 {
		t.Errorf("lease still held for %s after its holder stopped", in)
	}
	if got := release("--force").Wait(t, 10*time.Second); got != 1 {
		t.Errorf("release --force of a free lease exited %d, want 1", got)
	}

	// --force frees a (presumed dead) holder's lease at once.
	q := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--id", "host-b", "--", self())...)
	q.Expect(t, "ready")
	r := release("--force", "--yes")
	if line := <-r.Lines; !strings.HasPrefix(line, "released the lease on j held by host-b (token ") {
		t.Errorf("release --force --yes printed %q", line)
	}
	if got := r.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("release --force --yes exited %d", got)
	}
	if in := d.expiresIn(t, "j"); in > 0 {
		t.Errorf("lease still held for %s after release --force", in)
	}
	if got := q.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("forcibly released holder exited %d, want 75", got)
	}
}

// A child stopped because the database stopped answering has its status
// recorded once the database is back.
func TestRunHistoryRecordsAStopForLeaseLoss(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	proxy, url := pgtest.Proxied(t, d.pool)
	p := lw(t, []string{child("ready block")}, d.args("--database-url", url, "--job", "j", "--", self())...)
	p.Expect(t, "ready")
	proxy.Blackhole()
	p.WaitLog(t, "child exited")
	proxy.Restore()
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("exit %d, want 75", got)
	}
	var code *int
	var finished bool
	if err := d.pool.QueryRow(t.Context(), `SELECT last_exit_code, last_finished_at IS NOT NULL FROM "`+d.table+`"`).Scan(&code, &finished); err != nil {
		t.Fatal(err)
	}
	if code == nil || *code != 143 || !finished {
		t.Errorf("recorded exit %v (finished %v), want 143", code, finished)
	}
}
