package faulttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
)

// The instances of one job disagree in --catch-up, --catch-up-window and
// --history-keep; their connections are cut for longer than some of their
// windows, they are frozen and killed, and an operator empties the claims
// table (TRUNCATE, DELETE) and pauses and resumes the job while they run. Every time in the window still
// has one history row, no time runs twice, a child runs only for a run,
// and fencing tokens rise.
func TestScheduleExactlyOnceWhenInstancesDisagree(t *testing.T) {
	t.Parallel()
	const (
		period = 2 * time.Second
		times  = 50
	)
	f := newFleet(t, 4, "@every 2s")
	f.members[0].flags = []string{"--catch-up", "all", "--catch-up-window", "1h"}
	f.members[1].flags = []string{"--catch-up", "latest", "--catch-up-window", "5s"}
	f.members[2].flags = []string{"--catch-up", "none", "--history-keep", "1h"}
	f.members[3].flags = []string{"--catch-up", "all", "--catch-up-window", "10s"}
	for _, m := range f.members {
		f.start(m)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	t.Logf("seed %d", seed)
	f.registered()
	from := f.dbNow().Truncate(period).Add(3 * period)
	to := from.Add((times - 1) * period)
	claims := pgx.Identifier{f.table + "_schedule"}.Sanitize()
	c := newChaos(f, rng, period)
	nextFault, nextEmpty, nextPause := time.Now(), time.Now().Add(5*time.Second), time.Now().Add(8*time.Second)
	paused := false
	for f.dbNow().Before(to.Add(period)) {
		now := c.tick()
		if now.After(nextPause) && !paused {
			// An operator pauses the job for a few times, then resumes it.
			nextPause, paused = now.Add(time.Duration(10000+rng.IntN(8000))*time.Millisecond), true
			c.faults["pause"]++
			f.operator("pause", "--job", "work", "--reason", "fault harness")
			c.later(time.Duration(2000+rng.IntN(4000))*time.Millisecond, func() { f.operator("resume", "--job", "work"); paused = false })
		}
		if now.After(nextEmpty) {
			nextEmpty = now.Add(time.Duration(6000+rng.IntN(6000)) * time.Millisecond)
			sql := "TRUNCATE " + claims
			if rng.IntN(2) == 0 {
				sql = "DELETE FROM " + claims + " WHERE random() < 0.7"
			}
			c.faults["empty-claims"]++
			if _, err := f.pool.Exec(context.Background(), sql); err != nil {
				t.Fatal(err)
			}
		}
		if now.After(nextFault) {
			nextFault = now.Add(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
			// Longer than the short windows: back with an old position.
			c.strikeAtRandom(time.Duration(1000+rng.IntN(14000))*time.Millisecond,
				odds{faultKill, 25}, odds{faultStop, 25}, odds{faultCut, 50})
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.end("disagree", times, to, func() map[string]int { return f.checkOncePerTime(from, to, period) })
}

// checkOncePerTime is checkExactlyOnce for a claims table an operator
// emptied: the history, which nobody prunes here, is the account of each
// time (a claim, where one is left, must agree with it).
func (f *fleet) checkOncePerTime(from, to time.Time, period time.Duration) map[string]int {
	f.t.Helper()
	accounts := f.accounts(from, to)
	ran := f.ranBy()
	counts := map[string]int{}
	for at := from.UTC(); !at.After(to); at = at.Add(period) {
		a := accounts[at]
		children := ran[at]
		switch {
		case a == nil || len(a.history) != 1:
			var h []string
			if a != nil {
				h = a.history
			}
			f.t.Errorf("%s: history %q: want exactly one row", at.Format(time.TimeOnly), h)
		case a.claim != "" && ((a.claim == "run") != runOutcome(a.history[0]) || !runOutcome(a.history[0]) && a.claim != a.history[0]):
			f.t.Errorf("%s: claim %s disagrees with history %s", at.Format(time.TimeOnly), a.claim, a.history[0])
		}
		if len(children) > 1 {
			f.t.Errorf("%s: run %d times, by %v", at.Format(time.TimeOnly), len(children), children)
		}
		if a != nil && len(a.history) > 0 {
			if len(children) > 0 && !runOutcome(a.history[0]) {
				f.t.Errorf("%s: a child ran a time recorded %s", at.Format(time.TimeOnly), a.history[0])
			}
			counts[a.history[0]]++
		}
	}
	f.checkTokensRise()
	return counts
}

// Instance A keeps claims and runs 5 s and catches up 5 s; B catches up
// everything within an hour. B's connection is cut for 30 s while A runs
// the times: back with its old position, B must run none of them again
// (A pruned their claims meanwhile).
func TestSchedulePrunedClaimsAreNotRunAgain(t *testing.T) {
	t.Parallel()
	const period = 2 * time.Second
	f := newFleet(t, 2, "@every 2s")
	a, b := f.members[0], f.members[1]
	a.flags = []string{"--history-keep", "5s", "--catch-up-window", "5s"}
	b.flags = []string{"--catch-up", "all", "--catch-up-window", "1h"}
	f.start(a)
	f.start(b)
	f.registered()
	start := f.dbNow().Truncate(period).Add(2 * period)
	f.waitClaim(start, 2*period+20*time.Second)
	b.proxy.Cut()
	f.sleepUntil(start.Add(30 * time.Second))
	b.proxy.Restore()
	// Long enough for B to catch up whatever it believes it owes.
	f.sleepUntil(start.Add(30*time.Second + 5*ttl))
	f.stop()
	for at, runs := range f.ranBy() {
		if len(runs) > 1 {
			t.Errorf("%s: run %d times, by %v", at.Format(time.TimeOnly), len(runs), runs)
		}
	}
	if len(f.ranBy()) < 10 {
		t.Errorf("only %d times ran in 30 s of @every 2s", len(f.ranBy()))
	}
	f.checkTokensRise()
}

// operator runs a leasewrap command of an operator's (pause, resume) on
// the fleet's table, straight to the database, and waits for it.
func (f *fleet) operator(args ...string) {
	f.t.Helper()
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", f.dbUser, f.dbAddr, f.dbName)
	p := lwtest.Start(f.t, binary, nil, append(args, "--database-url", url, "--table", f.table)...)
	if code := p.Wait(f.t, 20*time.Second); code != 0 {
		f.t.Fatalf("leasewrap %v exited %d", args, code)
	}
}
