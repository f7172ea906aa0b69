package lease_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/lease"
)

// waiter is a standby of its own Store and pool, waiting for a lease in
// the background, with every round trip it makes traced.
type waiter struct {
	holder string
	tr     *tracer
	got    chan *lease.Lease
	stop   context.CancelFunc // ends the Acquire: the standby leaves the queue
}

// stand starts holder's Acquire of job on table.
func stand(t *testing.T, table, job, holder string, opts ...lease.Option) *waiter {
	t.Helper()
	w := &waiter{holder: holder, tr: &tracer{}, got: make(chan *lease.Lease, 1)}
	s := newStore(t, tracedPool(t, pgtest.URL(), w.tr), table, holder, opts...)
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.stop = cancel
	go func() {
		l, err := s.Acquire(c, job)
		if err != nil && c.Err() == nil {
			t.Errorf("%s: %v", holder, err)
		}
		w.got <- l
	}()
	return w
}

// lease waits for w's lease.
func (w *waiter) lease(t *testing.T, within time.Duration) *lease.Lease {
	t.Helper()
	select {
	case l := <-w.got:
		if l == nil {
			t.Fatalf("%s got no lease", w.holder)
		}
		return l
	case <-time.After(within):
		t.Fatalf("%s got no lease within %s", w.holder, within)
		return nil
	}
}

// writes are w's statements since trip i that write the lease row: takes
// and adoptions.
func (w *waiter) writes(i int) []trip {
	var out []trip
	for _, tr := range w.tr.since(i) {
		if isTake(tr) || isAdopt(tr) {
			out = append(out, tr)
		}
	}
	return out
}

// queueOf reads job's queue, its holders in the order a release hands
// the lease on (an entry marked as handed a slot is out of it).
func queueOf(t *testing.T, pool *pgxpool.Pool, table, job string) []string {
	t.Helper()
	var holders []string
	err := pool.QueryRow(ctx(t), `SELECT coalesce(array_agg(e->>'holder' ORDER BY (e->>'pinned')::boolean DESC,
  (e->>'priority')::integer DESC, (e->>'since')::bigint), '{}') FROM `+pgx.Identifier{table}.Sanitize()+`,
  jsonb_array_elements(coalesce(queue, '[]')) AS e WHERE job_name = $1 AND e->>'handed_until' IS NULL`, job).Scan(&holders)
	if err != nil {
		t.Fatal(err)
	}
	return holders
}

// waitQueue waits until job's queue is holders, in order.
func waitQueue(t *testing.T, pool *pgxpool.Pool, table, job string, holders ...string) {
	t.Helper()
	pgtest.Eventually(t, 20*time.Second, fmt.Sprintf("queue %v", holders), func() bool {
		return slices.Equal(queueOf(t, pool, table, job), holders)
	})
}

// A release hands the lease to the standby first in line, highest
// priority first and then first come, in the statement that releases it:
// of nine standbys, the one handed the lease sends the only write, its
// adoption; the others send nothing but the looks they poll with behind
// the head of the queue (the next in line may also start listening), and
// every run is recorded once, tokens rising.
func TestAReleaseHandsTheLeaseOnInQueueOrder(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run(fmt.Sprintf("listen=%v", listen), func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			table := pgtest.Table(t, pool)
			opts := []lease.Option{lease.WithListen(listen)}
			holder := mustAcquire(t, newStore(t, pool, table, "a"), "job")
			var ws []*waiter
			for i, name := range []string{"b", "c", "d"} {
				ws = append(ws, stand(t, table, "job", name, opts...))
				waitQueue(t, pool, table, "job", []string{"b", "c", "d"}[:i+1]...)
			}
			ws = append(ws, stand(t, table, "job", "e", append(opts, lease.WithPriority(1))...))
			waitQueue(t, pool, table, "job", "e", "b", "c", "d")
			// Five more behind them all, there to be quiet.
			behind := []string{"f", "g", "h", "i", "j"}
			for i, name := range behind {
				ws = append(ws, stand(t, table, "job", name, append(opts, lease.WithPriority(-1))...))
				waitQueue(t, pool, table, "job", append([]string{"e", "b", "c", "d"}, behind[:i+1]...)...)
			}
			order := []*waiter{ws[3], ws[0], ws[1], ws[2]}
			line := append(slices.Clone(order), ws[4:]...) // the whole queue, in order
			if listen {
				// The head's start ends with its probe (see probe): quiet
				// standing by is judged from there.
				pgtest.Eventually(t, 20*time.Second, "the head's probe", func() bool {
					return countTrips(ws[3].tr.since(0), isProbe) > 0
				})
				// Every standby listens once at its start and stops
				// behind the head, which a loaded machine may do late.
				waitListeners(t, pool, ws, ws[3].holder)
			}
			first := lease.FirstExpiry(lease.DeriveTimings(10 * time.Second))
			for i, next := range order {
				mark := make([]int, len(ws))
				for j, w := range ws {
					mark[j] = w.tr.len()
				}
				if err := holder.Release(ctx(t), nil); err != nil {
					t.Fatal(err)
				}
				holder = next.lease(t, 10*time.Second)
				// Past the first expiry, when the next in line looks once.
				time.Sleep(first + 500*time.Millisecond)
				for j, w := range ws {
					if i > 0 && w == order[i-1] {
						continue // the releasing holder
					}
					writes := w.writes(mark[j])
					switch {
					case w == next && (len(writes) != 1 || !isAdopt(writes[0])):
						t.Errorf("handoff %d: %s, handed the lease, wrote %v; want its adoption alone", i+1, w.holder, writes)
					case w != next && len(writes) > 0:
						t.Errorf("handoff %d to %s: %s wrote %v; want nothing", i+1, next.holder, w.holder, writes)
					case listen && w != next && w != line[i+1] && !onlyPolled(w.tr.since(mark[j])):
						t.Errorf("handoff %d to %s: %s, not next, sent %s; want its looks alone", i+1, next.holder, w.holder, brief(w.tr.since(mark[j])))
					}
				}
			}
			for _, w := range ws[4:] {
				w.stop()
			}
			waitQueue(t, pool, table, "job")
			if err := holder.Release(ctx(t), nil); err != nil {
				t.Fatal(err)
			}
			runs := historyOf(t, pool, table)
			if got := strings.Join(runs.holders, " "); got != "a e b c d" {
				t.Errorf("runs by %s, want a e b c d", got)
			}
			for i := 1; i < len(runs.tokens); i++ {
				if runs.tokens[i] <= runs.tokens[i-1] {
					t.Errorf("tokens %v do not rise", runs.tokens)
				}
			}
		})
	}
}

// Polling standbys (no LISTEN, as behind PgBouncer) look at the pace of
// their place: the head of the queue every retry interval, the standbys
// behind it every four (pollBehind), so that a queue of polling standbys
// costs the database little more than its head does.
func TestPollingStandbysBehindTheHeadLookFourTimesAsSeldom(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	timings := []lease.Option{lease.WithTTL(20 * time.Second), lease.WithRenewInterval(time.Second),
		lease.WithGrace(time.Second), lease.WithRetryInterval(100 * time.Millisecond), lease.WithListen(false)}
	holder := mustAcquire(t, newStore(t, pool, table, "a", timings...), "job")
	var ws []*waiter
	for i, name := range []string{"b", "c", "d"} {
		ws = append(ws, stand(t, table, "job", name, timings...))
		waitQueue(t, pool, table, "job", []string{"b", "c", "d"}[:i+1]...)
	}
	mark := make([]int, len(ws))
	for i, w := range ws {
		mark[i] = w.tr.len()
	}
	looks := func(i int) int { return countTrips(ws[i].tr.since(mark[i]), isLook) }
	pgtest.Eventually(t, 30*time.Second, "24 looks of the head of the queue", func() bool { return looks(0) >= 24 })
	head := looks(0)
	for i, w := range ws[1:] {
		// Jitter shortens a wait by up to a tenth: a fourth of the head's
		// looks and a ninth more, and the one each may be between.
		if n := looks(i + 1); n == 0 || n > head/3+2 {
			t.Errorf("%s, behind the head of the queue, looked %d times while the head looked %d; want once for every four of the head's", w.holder, n, head)
		}
	}
	for _, w := range ws {
		w.stop()
	}
	waitQueue(t, pool, table, "job")
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
}

// A job of several slots has one queue for all of them: a release of any
// slot hands it to the standby first in line, in the statement that
// releases it, and that standby's adoption of that slot is the only
// write any standby sends.
func TestAFreedSlotGoesToTheHeadOfTheQueue(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run(fmt.Sprintf("listen=%v", listen), func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			table := pgtest.Table(t, pool)
			opts := []lease.Option{lease.WithListen(listen), lease.WithSlots(2)}
			a := mustAcquire(t, newStore(t, pool, table, "a", opts...), "job")
			b := mustAcquire(t, newStore(t, pool, table, "b", opts...), "job")
			var ws []*waiter
			for i, name := range []string{"c", "d"} {
				ws = append(ws, stand(t, table, "job", name, opts...))
				waitQueue(t, pool, table, "job", []string{"c", "d"}[:i+1]...)
			}
			ws = append(ws, stand(t, table, "job", "e", append(opts, lease.WithPriority(1))...))
			waitQueue(t, pool, table, "job", "e", "c", "d")
			// Each step releases a slot's holder and names who must get
			// which slot: b's slot 2 to e, a's slot 1 to c, e's slot 2 to d.
			held := map[string]*lease.Lease{"a": a, "b": b}
			steps := []struct {
				from string
				to   *waiter
				slot int
			}{{"b", ws[2], 2}, {"a", ws[0], 1}, {"e", ws[1], 2}}
			for i, step := range steps {
				mark := make([]int, len(ws))
				for j, w := range ws {
					mark[j] = w.tr.len()
				}
				if err := held[step.from].Release(ctx(t), nil); err != nil {
					t.Fatal(err)
				}
				l := step.to.lease(t, 10*time.Second)
				held[step.to.holder] = l
				if l.Slot() != step.slot {
					t.Errorf("handoff %d: %s got slot %d, want %d", i+1, step.to.holder, l.Slot(), step.slot)
				}
				for j, w := range ws {
					writes := w.writes(mark[j])
					switch {
					case w == step.to && (len(writes) != 1 || !isAdopt(writes[0])):
						t.Errorf("handoff %d: %s, handed slot %d, wrote %v; want its adoption alone", i+1, w.holder, step.slot, writes)
					case w != step.to && w.holder != step.from && len(writes) > 0:
						t.Errorf("handoff %d to %s: %s wrote %v; want nothing", i+1, step.to.holder, w.holder, writes)
					}
				}
			}
			if q := queueOf(t, pool, table, "job"); len(q) != 0 {
				t.Errorf("queue %v after every standby got a slot, want empty", q)
			}
			for _, name := range []string{"c", "d"} {
				if err := held[name].Release(ctx(t), nil); err != nil {
					t.Fatal(err)
				}
			}
			runs := historyOf(t, pool, table)
			if got := strings.Join(runs.holders, " "); got != "a b e c d" {
				t.Errorf("runs by %s (in token order), want a b e c d", got)
			}
		})
	}
}

// runs are a history's rows, oldest first.
type runs struct {
	holders, outcomes []string
	tokens            []int64
}

func historyOf(t *testing.T, pool *pgxpool.Pool, table string) runs {
	t.Helper()
	rows, err := pool.Query(ctx(t), `SELECT holder, outcome, fencing_token FROM `+pgx.Identifier{table + "_history"}.Sanitize()+
		` ORDER BY fencing_token, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var r runs
	for rows.Next() {
		var h, o string
		var tok int64
		if err := rows.Scan(&h, &o, &tok); err != nil {
			t.Fatal(err)
		}
		r.holders, r.outcomes, r.tokens = append(r.holders, h), append(r.outcomes, o), append(r.tokens, tok)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// A standby that died is passed over, and one that froze is handed the
// lease, never adopts it, and holds the job up for the first expiry
// alone: the next in line takes it then (told by the handoff's
// notification that it is next), and the frozen one's handoff is
// recorded could_not_start with its own token.
func TestADeadOrFrozenStandbyCostsTheFirstExpiryAtMost(t *testing.T) {
	t.Parallel()
	stall.Watch()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	quoted := pgx.Identifier{table}.Sanitize()
	holder := mustAcquire(t, newStore(t, pool, table, "a"), "job")
	c := stand(t, table, "job", "c")
	waitQueue(t, pool, table, "job", "c")
	// A frozen standby's backend is alive.
	pid, started := frozenBackend(t, pool)
	mustExec(t, pool, fmt.Sprintf(`UPDATE %s SET queue = jsonb_build_array(
  jsonb_build_object('holder', 'dead', 'id', 'dead', 'priority', 0, 'since', 1, 'pid', 2147483647, 'started', 1),
  jsonb_build_object('holder', 'frozen', 'id', 'frozen', 'priority', 0, 'since', 2, 'pid', %d, 'started', %d)) || queue`, quoted, pid, started))
	released := time.Now()
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	l := c.lease(t, 20*time.Second)
	defer l.Release(ctx(t), nil)
	first := lease.FirstExpiry(lease.DeriveTimings(10 * time.Second))
	// The notification comes at once, the look a millisecond after the
	// first expiry, the take a round trip later: a retry interval (50ms)
	// covers both, and what this machine stalled the test.
	if took, bound := time.Since(released), first+50*time.Millisecond+stall.Since(released)+time.Second; took > bound {
		t.Errorf("c took the lease %s after the release, want within %s", took, bound)
	}
	runs := historyOf(t, pool, table)
	if got := fmt.Sprint(runs.holders, runs.outcomes); got != "[a frozen] [exited could_not_start]" {
		t.Errorf("history %s, want a's run and frozen's handoff, could_not_start", got)
	}
	if len(runs.tokens) == 2 && !(runs.tokens[0] < runs.tokens[1] && runs.tokens[1] < l.Token()) {
		t.Errorf("tokens a %d, frozen %d, c %d: want rising", runs.tokens[0], runs.tokens[1], l.Token())
	}
}

// frozenBackend is a frozen standby's backend: a connection held until
// the test ends, its pid and its start in microseconds, as a listening
// entry names them.
func frozenBackend(t *testing.T, pool *pgxpool.Pool) (pid int, started int64) {
	t.Helper()
	frozen, err := pool.Acquire(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(frozen.Release)
	if err := frozen.QueryRow(ctx(t), `SELECT pid, (extract(epoch FROM backend_start) * 1000000)::bigint
FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&pid, &started); err != nil {
		t.Fatal(err)
	}
	return pid, started
}

// A holder that dies without releasing frees the lease (or its slot) at
// its expiry; then the head of the queue takes it, and no other standby
// tries (the head's turn is not over): one take.
func TestAfterACrashTheHeadOfTheQueueTakesAlone(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			table := pgtest.Table(t, pool)
			quoted := pgx.Identifier{table}.Sanitize()
			// After a crash the head's turn is a retry interval: half a
			// second, more than a busy machine makes its look late by.
			opts := []lease.Option{lease.WithSlots(slots), lease.WithRetryInterval(500 * time.Millisecond)}
			if slots > 1 {
				mustAcquire(t, newStore(t, pool, table, "a", opts...), "job") // slot 1, held on
			}
			// The last slot's holder dies: its lease is left held, unreleased.
			crashed := lease.SlotRow("job", slots)
			if err := mustAcquire(t, newStore(t, pool, table, "setup", opts...), "job").Release(ctx(t), nil); err != nil {
				t.Fatal(err)
			}
			// Its lease runs out unreleased in a few seconds, an expiry every
			// standby reads at its start and looks just after.
			var expires time.Time
			if err := pool.QueryRow(ctx(t), `UPDATE `+quoted+` SET holder = 'dead', released_at = NULL, expires_at = now() + interval '6 seconds'
WHERE job_name = $1 RETURNING expires_at`, crashed).Scan(&expires); err != nil {
				t.Fatal(err)
			}
			var ws []*waiter
			names := []string{"b", "c", "d", "e"}
			for i, name := range names {
				ws = append(ws, stand(t, table, "job", name, opts...))
				waitQueue(t, pool, table, "job", names[:i+1]...)
			}
			if time.Until(expires) < 0 {
				t.Fatalf("the queue formed %s after the lease expired: the machine is too busy for this test", -time.Until(expires))
			}
			// From here: a standby of several slots tried a take to start.
			mark := make([]int, len(ws))
			for i, w := range ws {
				mark[i] = w.tr.len()
			}
			l := ws[0].lease(t, 20*time.Second)
			defer l.Release(ctx(t), nil)
			if l.Row() != crashed {
				t.Errorf("b took %s, want %s", l.Row(), crashed)
			}
			time.Sleep(time.Second)
			for i, w := range ws[1:] {
				if writes := w.writes(mark[i+1]); len(writes) > 0 {
					t.Errorf("%s, behind b in the queue, wrote %v", w.holder, writes)
				}
			}
		})
	}
}

// A head of the queue that froze (its backend alive, so its entry is
// live) or a polling one that died (its entry counts for its life) does
// not hold a lease that expired unreleased up for longer than its turn,
// a retry interval: every standby looks just after the expiry it saw,
// the head too, so the standby behind it takes the lease then, and a
// crash is taken over within the TTL and a retry interval. (A turn of
// the first expiry and a polling interval, a handoff's, would be 1s and
// 1.2s here.)
func TestADeadOrFrozenHeadHoldsACrashedLeaseUpForARetryInterval(t *testing.T) {
	t.Parallel()
	stall.Watch()
	timings := lease.DeriveTimings(10 * time.Second)
	timings.RetryInterval = 50 * time.Millisecond // fast's
	for _, head := range []string{"frozen", "dead poller"} {
		t.Run(head, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			table := pgtest.Table(t, pool)
			quoted := pgx.Identifier{table}.Sanitize()
			if err := mustAcquire(t, newStore(t, pool, table, "setup"), "job").Release(ctx(t), nil); err != nil {
				t.Fatal(err)
			}
			mustExec(t, pool, `UPDATE `+quoted+` SET holder = 'dead', released_at = NULL, expires_at = now() + interval '2 seconds'`)
			entry := fmt.Sprintf(`jsonb_build_object('holder', 'poller', 'id', 'poller', 'priority', 1, 'since', 1,
  'until', (extract(epoch FROM now()) * 1000000)::bigint + %d, 'every', %d)`,
				lease.PollingEntryLife(timings.TTL).Microseconds(), (4 * timings.RetryInterval).Microseconds())
			if head == "frozen" {
				pid, started := frozenBackend(t, pool)
				entry = fmt.Sprintf(`jsonb_build_object('holder', 'frozen', 'id', 'frozen', 'priority', 1, 'since', 1,
  'pid', %d, 'started', %d)`, pid, started)
			}
			mustExec(t, pool, `UPDATE `+quoted+` SET queue = jsonb_build_array(`+entry+`)`)
			var expires time.Time
			if err := pool.QueryRow(ctx(t), `SELECT expires_at FROM `+quoted).Scan(&expires); err != nil {
				t.Fatal(err)
			}
			c := stand(t, table, "job", "c")
			l := c.lease(t, 20*time.Second)
			defer l.Release(ctx(t), nil)
			var took time.Time
			if err := pool.QueryRow(ctx(t), `SELECT acquired_at FROM `+quoted).Scan(&took); err != nil {
				t.Fatal(err)
			}
			// c looks at the expiry, then again when the head's turn is
			// over, and takes: 300ms covers the round trips, and
			// what this machine stalled the test the rest.
			after, turn := took.Sub(expires), timings.RetryInterval
			if bound := turn + 300*time.Millisecond + stall.Since(expires); after < turn || after > bound {
				t.Errorf("c took the lease %s after it expired, want after the %s head's turn (%s) and within %s", after, head, turn, bound)
			}
		})
	}
}

// release --to: Pin puts a queued standby first, whatever its place; a
// holder id that is not queued is refused, with the queue's holders.
func TestPinHandsTheLeaseToTheStandbyChosen(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	holder := mustAcquire(t, s, "job")
	b := stand(t, table, "job", "b")
	waitQueue(t, pool, table, "job", "b")
	c := stand(t, table, "job", "c")
	waitQueue(t, pool, table, "job", "b", "c")
	if queued, pinned, err := s.Pin(ctx(t), "job", "z"); err != nil || pinned || !slices.Equal(queued, []string{"b", "c"}) {
		t.Fatalf("Pin(z) = %v, %v, %v; want [b c], not pinned", queued, pinned, err)
	}
	if _, pinned, err := s.Pin(ctx(t), "job", "c"); err != nil || !pinned {
		t.Fatalf("Pin(c) = %v, %v; want pinned", pinned, err)
	}
	if err := holder.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	l := c.lease(t, 10*time.Second)
	if err := l.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	b.lease(t, 10*time.Second).Release(ctx(t), nil)
}

// onlyPolled reports whether trips are a polling standby's alone: looks,
// and entries into the queue.
func onlyPolled(trips []trip) bool {
	for _, tr := range trips {
		if !isLook(tr) && !isEnter(tr) {
			return false
		}
	}
	return true
}

// brief names trips by their first line, for a failure's message.
func brief(trips []trip) string {
	var out []string
	for _, tr := range trips {
		for _, sql := range tr.sql {
			first, _, _ := strings.Cut(sql, "\n")
			out = append(out, tr.at.Format("15:04:05.000")+" "+first)
		}
	}
	return strings.Join(out, "; ")
}

// A pause lets every turn of the queue lapse, and a resume starts them
// again: the lease goes to the head of the queue (b, priority 3), and the
// standbys behind it (c, then a, first in) do not even try a take, though
// each is woken by the resume and the lease was freed long before. Three
// rounds: without the turns started again, any of the three may win.
func TestAfterAResumeTheHeadOfTheQueueTakesAlone(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	first := lease.FirstExpiry(lease.DeriveTimings(10 * time.Second))
	for round := range 3 {
		table := pgtest.Table(t, pool)
		holder := mustAcquire(t, newStore(t, pool, table, "h"), "job")
		a := stand(t, table, "job", "a")
		waitQueue(t, pool, table, "job", "a")
		b := stand(t, table, "job", "b", lease.WithPriority(3))
		c := stand(t, table, "job", "c", lease.WithPriority(1))
		waitQueue(t, pool, table, "job", "b", "c", "a")
		op := newStore(t, pool, table, "ops")
		if _, _, err := op.Pause(ctx(t), "job", "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := holder.Release(ctx(t), nil); err != nil {
			t.Fatal(err)
		}
		// Let every turn counted from the release lapse: only the resume
		// can start them again.
		time.Sleep(first + 500*time.Millisecond)
		waitQueue(t, pool, table, "job", "b", "c", "a")
		markA, markC := a.tr.len(), c.tr.len()
		if _, err := op.Resume(ctx(t), "job"); err != nil {
			t.Fatal(err)
		}
		l := b.lease(t, 10*time.Second)
		for _, w := range []struct {
			*waiter
			mark int
		}{{a, markA}, {c, markC}} {
			if writes := w.writes(w.mark); len(writes) > 0 {
				t.Errorf("round %d: %s, behind b in the queue, wrote %v after the resume", round+1, w.holder, writes)
			}
		}
		if err := l.Release(ctx(t), nil); err != nil {
			t.Fatal(err)
		}
		c.lease(t, 10*time.Second).Release(ctx(t), nil)
		a.lease(t, 10*time.Second).Release(ctx(t), nil)
	}
}
