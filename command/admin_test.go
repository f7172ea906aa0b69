package command

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// Cron hosts whose clocks are a little apart run a 200ms job: with
// --hold-for 5s a host whose attempt reaches the database inside the hold
// (5s from the first host's acquired_at, on the database clock) sits out;
// without, every host runs it. Whether a late host's attempt fell inside
// the hold is measured, never assumed from when it was started: a host that
// sat out logs how long the hold had left, and one that ran left its
// acquired_at in the row. On a machine so loaded that no host arrives
// inside the hold, the scenario is tried again on a fresh job.
func TestHoldForKeepsLateCronPeersOut(t *testing.T) {
	t.Parallel()
	t.Run("hold-for 5s", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		const hold = 5 * time.Second
		for round := 1; round <= 3; round++ {
			if lateCronPeers(t, d, fmt.Sprint("report-", round), hold) > 0 {
				return
			}
		}
		t.Fatalf("in 3 tries no late host reached the database inside the %s hold", hold)
	})
	t.Run("hold-for 0s", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		history := filepath.Join(t.TempDir(), "history")
		for i := range 3 {
			cronHost(t, d, "report", "0s", i, history)
		}
		if runs := readHistory(t, history); len(runs) != 3 {
			t.Errorf("%d runs, want 3: %+v", len(runs), runs)
		}
	})
}

// lateCronPeers runs a first host's job with --hold-for hold, then two more
// hosts one after the other once it has finished. It fails the test if a
// host took the lease before the hold ended, and returns how many hosts
// attempted inside the hold (and so sat out).
func lateCronPeers(t *testing.T, d db, job string, hold time.Duration) int {
	t.Helper()
	history := filepath.Join(t.TempDir(), "history")
	cronHost(t, d, job, hold.String(), 0, history)
	var acquired, expires time.Time
	if err := d.pool.QueryRow(t.Context(), `SELECT acquired_at, expires_at FROM `+pgx.Identifier{d.table}.Sanitize()+
		` WHERE job_name = $1`, job).Scan(&acquired, &expires); err != nil {
		t.Fatal(err)
	}
	holdEnd := acquired.Add(hold)
	if !expires.Equal(holdEnd) && expires.Before(holdEnd) {
		t.Errorf("released lease expires at %s, before the hold ends at %s", expires, holdEnd)
	}
	inside := 0
	for i := 1; i <= 2; i++ {
		before := len(readHistory(t, history))
		p := cronHost(t, d, job, hold.String(), i, history)
		if len(readHistory(t, history)) == before {
			e := p.WaitLog(t, "skipped: another instance ran the job and --hold-for keeps its lease")
			if e["state"] != "kept" {
				t.Errorf("host %d skip logged %v, want state kept", i, e)
			}
			inside++
			continue
		}
		var took time.Time
		if err := d.pool.QueryRow(t.Context(), `SELECT acquired_at FROM `+pgx.Identifier{d.table}.Sanitize()+
			` WHERE job_name = $1`, job).Scan(&took); err != nil {
			t.Fatal(err)
		}
		if took.Before(holdEnd) {
			t.Fatalf("host %d took the lease at %s, %s before the %s hold of host 0 ended", i, took, holdEnd.Sub(took), hold)
		}
		t.Logf("host %d reached the database %s after the hold ended and ran: no verdict from it", i, took.Sub(holdEnd))
	}
	return inside
}

// cronHost runs one host's 200ms job to its end; the child records its run
// in history.
func cronHost(t *testing.T, d db, job, holdFor string, i int, history string) *lwtest.Proc {
	t.Helper()
	p := lw(t, []string{child("record:" + history + " sleep:200ms")},
		d.args("--job", job, "--hold-for", holdFor, "--id", fmt.Sprint("host", i), "--", self())...)
	if got := p.Wait(t, 30*time.Second); got != 0 {
		t.Fatalf("host %d exited %d", i, got)
	}
	return p
}

// A finished job whose lease --hold-for keeps is shown as kept, skips say
// so, and release explains how to end the hold.
func TestHoldForIsVisible(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	storeArgs := []string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--job", "report"}
	first := lw(t, nil, d.args("--job", "report", "--id", "host-a", "--hold-for", "10m", "--", "true")...)
	if got := first.Wait(t, 10*time.Second); got != 0 {
		t.Fatalf("first run exited %d", got)
	}
	// Its log says kept, and until when, never released.
	kept := first.WaitLog(t, "kept until --hold-for ends")
	if until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(kept["until"])); err != nil ||
		until.Sub(logTime(t, kept)) < 9*time.Minute || until.Sub(logTime(t, kept)) > 10*time.Minute {
		t.Errorf("logged %v, want until about 10m on", kept)
	}
	if strings.Contains(first.Logs.String(), `"message":"released"`) {
		t.Errorf("a run whose lease --hold-for keeps logged released: %s", first.Logs)
	}
	skip := lw(t, nil, d.args("--job", "report", "--id", "host-b", "--", "true")...)
	if e := skip.WaitLog(t, "skipped: another instance ran the job and --hold-for keeps its lease"); e["state"] != "kept" {
		t.Errorf("skip logged %v", e)
	}
	// The same --id again (cron's next line on that host) is not told
	// another instance ran it.
	again := lw(t, nil, d.args("--job", "report", "--id", "host-a", "--", "true")...)
	if e := again.WaitLog(t, "skipped: an earlier run with this --id ran the job and --hold-for keeps its lease"); e["state"] != "kept" {
		t.Errorf("skip with the same --id logged %v", e)
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
	// next renewal; the lease stays held until then, so nothing overlaps:
	// the row expires only after the holder saw its command exit.
	p.Expect(t, "signal SIGTERM")
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("holder exited %d after a release, want 75", got)
	}
	var freed time.Time
	d.query(t, &freed, `SELECT expires_at FROM TABLE WHERE job_name = 'j'`)
	if exited := logTime(t, p.WaitLog(t, "child exited")); freed.Before(exited) {
		t.Errorf("lease free at %s, %s before its holder's command exited", freed.Format(time.RFC3339Nano), exited.Sub(freed))
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
	p := lw(t, []string{child("ready block")}, d.expiringArgs("--database-url", url, "--job", "j", "--", self())...)
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

// A release asked for twice is under way, not missing: the second says so
// and exits 0, and the holder stops once.
func TestReleaseAlreadyRequested(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	releaseAs := func(id string) []string {
		return []string{"release", "--database-url", pgtest.URL(), "--table", d.table, "--job", "j", "--id", id}
	}
	// Renewals 10s apart, and no listening for the release (the holder
	// finds it at its next renewal, as behind a pooler): both releases
	// come before the holder sees the first.
	p := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--id", "host-a", "--ttl", "30s",
		"--renew-interval", "10s", "--grace", "2s", "--retry-interval", "1s", "--listen=false", "--", self())...)
	p.Expect(t, "ready")
	if got := lw(t, nil, releaseAs("host-a")...).Wait(t, 10*time.Second); got != 0 {
		t.Fatalf("first release exited %d", got)
	}
	again := lw(t, nil, releaseAs("host-a")...)
	line := <-again.Lines
	if got := again.Wait(t, 10*time.Second); got != 0 || !strings.HasPrefix(line, "release already requested: host-a is told now and stops its command") {
		t.Errorf("second release exited %d with %q, want 0 and \"release already requested\"", got, line)
	}
	if got := lw(t, nil, releaseAs("other")...).Wait(t, 10*time.Second); got != 1 {
		t.Errorf("release --id other of a lease being released exited %d, want 1", got)
	}
	if got := p.Wait(t, 20*time.Second); got != 75 {
		t.Errorf("holder exited %d, want 75", got)
	}
}

// release --to hands the lease to the standby chosen, ahead of the queue's
// first; a holder id not in the queue is refused with exit 1, naming the
// standbys that are, and changes nothing.
func TestReleaseToHandsTheLeaseToTheStandbyChosen(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			t.Parallel()
			testReleaseTo(t, slots)
		})
	}
}

// testReleaseTo hands the job's last slot (of slots) to a standby chosen.
func testReleaseTo(t *testing.T, slots int) {
	d := newDB(t)
	start := func(id string, extra ...string) *lwtest.Proc {
		args := append([]string{"--job", "j", "--id", id, "--slots", strconv.Itoa(slots)}, extra...)
		return lw(t, []string{child("trap ready block")}, d.args(append(args, "--", self())...)...)
	}
	// host-a holds slot 1; with two slots, host-x holds slot 2.
	holders := []*lwtest.Proc{start("host-a")}
	holders[0].Expect(t, "ready")
	if slots > 1 {
		holders = append(holders, start("host-x"))
		holders[1].Expect(t, "ready")
	}
	holder := holders[slots-1]
	var standbys []*lwtest.Proc
	for i, id := range []string{"host-b", "host-c"} {
		standbys = append(standbys, start(id, "--wait"))
		pgtest.Eventually(t, 20*time.Second, id+" queued", func() bool {
			var n int
			err := d.pool.QueryRow(t.Context(), `SELECT coalesce(jsonb_array_length(queue), 0) FROM "`+d.table+`" WHERE job_name = 'j'`).Scan(&n)
			return err == nil && n == i+1
		})
	}
	releaseTo := func(id string) *lwtest.Proc {
		return lw(t, nil, "release", "--database-url", pgtest.URL(), "--table", d.table, "--job", "j", "--slot", strconv.Itoa(slots), "--to", id)
	}
	refused := releaseTo("host-z")
	if got := refused.Wait(t, 10*time.Second); got != 1 || !strings.Contains(refused.Logs.String(), "host-z is not in the queue of j (queued: host-b, host-c)") {
		t.Errorf("release --to host-z exited %d: %s; want 1, naming host-b and host-c", got, refused.Logs.String())
	}
	chosen := releaseTo("host-c")
	line := <-chosen.Lines
	want := "switchover requested: " + []string{"host-a", "host-x"}[slots-1] + " is told now and stops its command"
	if got := chosen.Wait(t, 10*time.Second); got != 0 || !strings.HasPrefix(line, want) || !strings.HasSuffix(line, "to host-c") {
		t.Errorf("release --to host-c exited %d with %q, want 0 and the switchover requested", got, line)
	}
	standbys[1].Expect(t, "ready")
	if got := holder.Wait(t, 20*time.Second); got != 75 {
		t.Errorf("holder exited %d, want 75", got)
	}
	var holderNow string
	if err := d.pool.QueryRow(t.Context(), `SELECT holder FROM "`+d.table+`" WHERE job_name = $1`, lease.SlotRow("j", slots)).Scan(&holderNow); err != nil || holderNow != "host-c" {
		t.Errorf("slot %d is %q's (%v), want host-c's", slots, holderNow, err)
	}
}
