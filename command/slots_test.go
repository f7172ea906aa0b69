package command

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// readySlot reads the child's env lines up to "ready" and returns its
// LEASEWRAP_SLOT.
func readySlot(t *testing.T, p *lwtest.Proc) string {
	t.Helper()
	slot := ""
	deadline := time.After(15 * time.Second)
	for {
		select {
		case line, ok := <-p.Lines:
			if !ok {
				t.Fatalf("output ended before ready; logs:\n%s", p.Logs)
			}
			if v, ok := strings.CutPrefix(line, "LEASEWRAP_SLOT="); ok {
				slot = v
			}
			if line == "ready" {
				return slot
			}
		case <-deadline:
			t.Fatal("no ready line in time")
		}
	}
}

// Six wrappers with --slots 2 start at once, each with a 2 s command:
// exactly two run, in different slots, with different fencing tokens, and
// the others sit out.
func TestSixWrappersRunTwoWithTwoSlots(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	procs := make([]*lwtest.Proc, 6)
	for i := range procs {
		procs[i] = lw(t, []string{child("record:" + record + " sleep:2s exit:0")},
			d.args("--job", "pool", "--slots", "2", "--id", fmt.Sprint("w", i), "--skip-exit-code", "3", "--", self())...)
	}
	ran, skipped := 0, 0
	for i, p := range procs {
		switch code := p.Wait(t, 30*time.Second); code {
		case 0:
			ran++
		case 3:
			skipped++
		default:
			t.Errorf("wrapper %d exited %d, want 0 (ran) or 3 (skipped); logs:\n%s", i, code, p.Logs)
		}
	}
	runs := readHistory(t, record)
	if ran != 2 || skipped != 4 || len(runs) != 2 {
		t.Fatalf("%d ran, %d skipped, %d children recorded; want 2, 4, 2", ran, skipped, len(runs))
	}
	if runs[0].Token == runs[1].Token {
		t.Errorf("both runs had fencing token %d, want one token per slot", runs[0].Token)
	}
	// Both ran at once: the second started before the first ended.
	if runs[1].Start >= runs[0].End {
		t.Errorf("the two runs did not overlap: the second slot was not used at once")
	}
	var slots []int
	d.query(t, &slots, `SELECT array_agg(slot ORDER BY slot) FROM TABLE_history WHERE job_name = 'pool'`)
	if fmt.Sprint(slots) != "[1 2]" {
		t.Errorf("history slots %v, want [1 2]", slots)
	}
}

// A SIGKILLed holder's slot is taken by a standby after the TTL, while the
// other slot's holder keeps running; the killed holder's run is closed as
// lost by the one that took its slot over.
func TestKilledSlotHolderIsTakenOverAfterItsTTL(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	args := func(id string) []string {
		return d.expiringArgs("--job", "pool", "--slots", "2", "--wait", "--id", id, "--", self())
	}
	a := lw(t, []string{child("env ready block")}, args("a")...)
	slotA := readySlot(t, a)
	b := lw(t, []string{child("env trap ready block")}, args("b")...)
	slotB := readySlot(t, b)
	if slotA == slotB || slotA == "" || slotB == "" {
		t.Fatalf("slots %q and %q, want two different slots", slotA, slotB)
	}
	c := lw(t, []string{child("env ready block")}, args("c")...)
	c.WaitLog(t, "standing by: lease held by another instance")
	tokenA := int64(a.WaitLog(t, "acquired")["fencing_token"].(float64))

	killed := time.Now()
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	slotC := readySlot(t, c)
	took := time.Since(killed)
	if slotC != slotA {
		t.Errorf("the standby took slot %s, want the killed holder's slot %s", slotC, slotA)
	}
	// The lease was renewed at most a renew interval (300ms) before the
	// kill: it cannot have expired sooner than TTL - renew interval.
	if took < 2*time.Second-300*time.Millisecond {
		t.Errorf("slot taken over %s after the kill, before the killed holder's TTL could run out", took)
	}
	select {
	case <-b.Exited:
		t.Fatalf("the other slot's holder exited %d; want it running on", b.Code())
	default:
	}
	var lost []string
	d.query(t, &lost, `SELECT array_agg(holder || ' ' || slot || ' ' || outcome || ' ' || (exit_code IS NULL))
FROM TABLE_history WHERE job_name = 'pool' AND fencing_token = $1`, tokenA)
	if want := "[a " + slotA + " lost true]"; fmt.Sprint(lost) != want {
		t.Errorf("history of the killed run: %v, want %s", lost, want)
	}
	_ = b.Cmd.Process.Signal(syscall.SIGTERM)
	if got := b.Wait(t, 10*time.Second); got != 143 {
		t.Errorf("other holder exited %d after SIGTERM, want 143", got)
	}
}

// A job's number of slots is recorded: an instance with another --slots is
// refused (64) while the job runs, and never runs its command.
func TestMixingSlotsIsRefused(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	holder := lw(t, []string{child("trap ready block")}, d.args("--job", "pool", "--slots", "2", "--", self())...)
	holder.Expect(t, "ready")
	for _, slots := range []string{"3", "1"} {
		p := lw(t, []string{child("ready exit:0")}, d.args("--job", "pool", "--slots", slots, "--", self())...)
		if got := p.Wait(t, 10*time.Second); got != 64 {
			t.Errorf("--slots %s exited %d, want 64", slots, got)
		}
		if !strings.Contains(p.Logs.String(), `job "pool" runs with 2 slots`) {
			t.Errorf("--slots %s: no reason given: %s", slots, p.Logs)
		}
		for line := range p.Lines {
			t.Errorf("--slots %s ran its command: %q", slots, line)
		}
	}
	// A single-slot job held by one instance refuses one with --slots 2.
	single := lw(t, []string{child("trap ready block")}, d.args("--job", "single", "--", self())...)
	single.Expect(t, "ready")
	p := lw(t, []string{child("ready exit:0")}, d.args("--job", "single", "--slots", "2", "--", self())...)
	if got := p.Wait(t, 10*time.Second); got != 64 || !strings.Contains(p.Logs.String(), "held by an instance with one slot") {
		t.Errorf("--slots 2 on a held single-slot job exited %d, want 64 with a reason: %s", got, p.Logs)
	}
	for _, h := range []*lwtest.Proc{holder, single} {
		_ = h.Cmd.Process.Signal(syscall.SIGTERM)
		h.Wait(t, 10*time.Second)
	}
}

// query scans one value; TABLE stands for the test's lease table.
func (d db) query(t *testing.T, dst any, sql string, args ...any) {
	t.Helper()
	sql = strings.ReplaceAll(sql, "TABLE_history", `"`+d.table+`_history"`)
	sql = strings.ReplaceAll(sql, "TABLE", `"`+d.table+`"`)
	if err := d.pool.QueryRow(context.Background(), sql, args...).Scan(dst); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// release --slot hands back one slot's lease and leaves the other running.
func TestReleaseOneSlot(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	a := lw(t, []string{child("trap ready block")}, d.args("--job", "w", "--slots", "2", "--id", "a", "--", self())...)
	a.Expect(t, "ready")
	b := lw(t, []string{child("trap ready block")}, d.args("--job", "w", "--slots", "2", "--id", "b", "--", self())...)
	b.Expect(t, "ready")
	args := []string{"release", "--database-url", pgtest.URL(), "--table", d.table, "--job", "w", "--id", "b"}
	if got := lw(t, nil, append(args, "--slot", "1")...).Wait(t, 10*time.Second); got != 1 {
		t.Errorf("release of b in slot 1 (a's) exited %d, want 1", got)
	}
	if got := lw(t, nil, append(args, "--slot", "2")...).Wait(t, 10*time.Second); got != 0 {
		t.Errorf("release --slot 2 exited %d, want 0", got)
	}
	if got := b.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("b exited %d after its slot's release, want 75", got)
	}
	select {
	case <-a.Exited:
		t.Errorf("a exited %d: releasing slot 2 stopped slot 1 too", a.Code())
	default:
	}
}
