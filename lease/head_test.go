package lease_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/lease"
)

// headRetry is headTimings' retry interval: a standby right behind the
// head of the queue looks every one, the others every four (2 s).
const headRetry = 500 * time.Millisecond

// headTimings give the standbys behind the head of a queue a pace a test
// can tell from an answer to a release.
var headTimings = []lease.Option{lease.WithTTL(6 * time.Second), lease.WithRenewInterval(time.Second),
	lease.WithGrace(time.Second), lease.WithRetryInterval(headRetry)}

// listeners names, for each backend of ws's standbys that listens now,
// its standby's holder. PostgreSQL shows no session's channels to
// another, and a backend's last query in pg_stat_activity may be any of
// its statements, so each standby's own round trips say which of its
// backends committed a LISTEN (and no UNLISTEN since), and
// pg_stat_activity which of those are still there: the same process,
// started before its LISTEN (a later one reuses the pid).
func listeners(t *testing.T, pool *pgxpool.Pool, ws ...*waiter) []string {
	t.Helper()
	var out []string
	for _, w := range ws {
		listening, begun := map[uint32]time.Time{}, map[uint32]time.Time{}
		for _, tr := range w.tr.since(0) {
			switch {
			case isListen(tr):
				begun[tr.pid] = tr.at
			case tr.sql[0] == "COMMIT" && !begun[tr.pid].IsZero():
				listening[tr.pid] = begun[tr.pid]
				delete(begun, tr.pid)
			case tr.sql[0] == "ROLLBACK":
				delete(begun, tr.pid)
			case strings.HasPrefix(tr.sql[0], "UNLISTEN"):
				delete(listening, tr.pid)
			}
		}
		for pid, since := range listening {
			var there bool
			if err := pool.QueryRow(ctx(t), `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND backend_start <= $2)`,
				int32(pid), since).Scan(&there); err != nil {
				t.Fatal(err)
			}
			if there {
				out = append(out, w.holder)
			}
		}
	}
	return out
}

// waitListeners waits until the one backend of ws's standbys that
// listens is holder's.
func waitListeners(t *testing.T, pool *pgxpool.Pool, ws []*waiter, holder string) {
	t.Helper()
	var got []string
	defer func() {
		if t.Failed() {
			t.Logf("listening: %v", got)
		}
	}()
	pgtest.Eventually(t, 20*time.Second, "only "+holder+" listening", func() bool {
		got = listeners(t, pool, ws...)
		return slices.Equal(got, []string{holder})
	})
}

// looked waits until w sends a look after its trip i, and returns the
// index past it.
func looked(t *testing.T, w *waiter, i int) int {
	t.Helper()
	pgtest.Eventually(t, 20*time.Second, w.holder+"'s next look", func() bool { return countTrips(w.tr.since(i), isLook) > 0 })
	for j, tr := range w.tr.since(i) {
		if isLook(tr) {
			return i + j + 1
		}
	}
	return i
}

// Of a job's standbys only the head of the queue listens, whatever the
// others do: a standby of higher priority that comes to the head takes
// its place as the listener, and after a handoff the next head starts
// listening and the old one's listening backend is gone.
func TestOnlyTheHeadOfTheQueueListens(t *testing.T) {
	t.Parallel()
	pool, table, holder, ws := queueOfThree(t)
	// And so it stays while the standbys behind look, twice each.
	c, d := looked(t, ws[1], looked(t, ws[1], ws[1].tr.len())), looked(t, ws[2], looked(t, ws[2], ws[2].tr.len()))
	if got := listeners(t, pool, ws...); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after c and d looked twice (trips %d, %d), listening: %v; want b alone", c, d, got)
	}
	e := stand(t, table, "job", "e", append(slices.Clone(headTimings), lease.WithPriority(1))...)
	ws = append(ws, e)
	waitQueue(t, pool, table, "job", "e", "b", "c", "d")
	waitListeners(t, pool, ws, "e")
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	holder = e.lease(t, 10*time.Second)
	waitListeners(t, pool, ws, "b")
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	holder = ws[0].lease(t, 10*time.Second)
	waitListeners(t, pool, ws, "c")
	for _, w := range ws[1:3] {
		w.stop()
	}
	waitQueue(t, pool, table, "job")
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
}

// A release wakes the head of the queue alone: when it comes, the head's
// is the one backend of the job's standbys that listens, and the
// standbys behind answer it with nothing: each one's next look comes at
// its own pace from its last (a retry interval right behind the head,
// four further back), not at the release.
func TestAReleaseWakesOnlyTheHead(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	holder := mustAcquire(t, newStore(t, pool, table, "a", headTimings...), "job")
	names := []string{"b", "c", "d", "e"}
	var ws []*waiter
	for i, name := range names {
		ws = append(ws, stand(t, table, "job", name, headTimings...))
		waitQueue(t, pool, table, "job", names[:i+1]...)
	}
	waitListeners(t, pool, ws, "b")
	mark := make([]int, len(ws))
	for i, w := range ws {
		mark[i] = w.tr.len()
	}
	if got := listeners(t, pool, ws...); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("listening at the release: %v; want b alone", got)
	}
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	defer ws[0].lease(t, 10*time.Second).Release(ctx(t), nil)
	for i, w := range ws[1:] {
		pace := lease.PollBehind * headRetry
		if w.holder == "c" {
			pace = headRetry
		}
		looked(t, w, mark[i+1])
		before, after := w.tr.since(0)[:mark[i+1]], w.tr.since(mark[i+1])
		last := len(before) - 1
		for last > 0 && !isLook(before[last]) {
			last--
		}
		next := slices.IndexFunc(after, isLook)
		// Jitter shortens a wait by up to a tenth.
		if gap := after[next].at.Sub(before[last].at); gap < pace*9/10-50*time.Millisecond || !onlyPolled(after[:next+1]) {
			t.Errorf("%s, behind the head, sent %s after the release, its look %s after its last; want its look at its pace (%s)",
				w.holder, brief(after[:next+1]), gap, pace)
		}
	}
}

// Three releases in a row hand the lease on in the queue's order, each
// as soon as the one before was adopted. The second goes to a standby
// that was right behind the head and did not listen yet: it adopts the
// lease at its next look, within a retry interval, though it had just
// looked when the first release came. The third goes to one that was
// further back, and is adopted within four.
func TestThreeReleasesInARowKeepTheQueuesOrder(t *testing.T) {
	t.Parallel()
	pool, table, holder, ws := queueOfThree(t)
	// Right after c's look: c's next one is a retry interval away.
	looked(t, ws[1], ws[1].tr.len())
	for i, bound := range []time.Duration{time.Second, headRetry, lease.PollBehind * headRetry} {
		released := time.Now()
		if err := holder.Release(ctx(t), nil); err != nil {
			t.Fatal(err)
		}
		holder = ws[i].lease(t, 10*time.Second)
		// A round trip or two on a loaded machine, and what it stalled
		// the test.
		took := time.Since(released)
		if bound += 300*time.Millisecond + stall.Since(released); took > bound {
			t.Errorf("handoff %d: %s took the lease %s after the release, want within %s", i+1, ws[i].holder, took, bound)
		}
	}
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	runs := historyOf(t, pool, table)
	if got := strings.Join(runs.holders, " "); got != "a b c d" {
		t.Errorf("runs by %s, want a b c d", got)
	}
	for i := 1; i < len(runs.tokens); i++ {
		if runs.tokens[i] <= runs.tokens[i-1] {
			t.Errorf("tokens %v do not rise", runs.tokens)
		}
	}
}

// queueOfThree starts a holder a of "job" and standbys b, c and d queued
// in that order, and waits until b, the head, listens.
func queueOfThree(t *testing.T) (*pgxpool.Pool, string, *lease.Lease, []*waiter) {
	t.Helper()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	holder := mustAcquire(t, newStore(t, pool, table, "a", headTimings...), "job")
	names := []string{"b", "c", "d"}
	var ws []*waiter
	for i, name := range names {
		ws = append(ws, stand(t, table, "job", name, headTimings...))
		waitQueue(t, pool, table, "job", names[:i+1]...)
	}
	waitListeners(t, pool, ws, "b")
	return pool, table, holder, ws
}
