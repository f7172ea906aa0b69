package lease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/session"
)

// A standby that leaves the queue (it was told to stop) just as a release
// hands it the lease, or a slot, frees it, says so on the job's channel
// as a release does, and the next take records the handoff
// could_not_start: a fleet stopped all at once leaves nothing held for a
// first expiry.
func TestAStandbyLeavingFreesALeaseHandedToIt(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			t.Parallel()
			testLeavingFrees(t, slots)
		})
	}
}

func testLeavingFrees(t *testing.T, slots int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	quoted := pgx.Identifier{table}.Sanitize()
	store := func(holder string) *Store {
		s, err := New(pool, append(standbyTimings, WithTable(table), WithHolder(holder), WithSlots(slots))...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := store("a"), store("b")
	l, err := a.TryAcquire(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if slots > 1 {
		// The slot handed on is the second: a keeps the first.
		if l, err = store("x").TryAcquire(ctx, "j"); err != nil || l.Slot() != 2 {
			t.Fatalf("x took %v (%v), want slot 2", l, err)
		}
	}
	row := l.Row()
	// b's entry, as a polling standby's that looked a moment ago.
	if _, err := pool.Exec(ctx, `UPDATE `+quoted+` SET queue = jsonb_build_array(jsonb_build_object(
  'holder', 'b', 'id', 'bid', 'priority', 0, 'since', 1, 'until', (extract(epoch FROM now()) * 1000000)::bigint + 60000000))
WHERE job_name = 'j'`); err != nil {
		t.Fatal(err)
	}
	heard := store("listener").newStandby(ctx, "j")
	defer heard.close(ctx)
	pgtest.Eventually(t, 30*time.Second, "a listener on j", func() bool { return heard.listening() || heard.listen(ctx) })
	zero := 0
	if err := l.Finish(ctx, End{ExitCode: &zero, Outcome: OutcomeExited}); err != nil {
		t.Fatal(err)
	}
	var holder string
	var live bool
	read := `SELECT holder, expires_at > now() FROM ` + quoted + ` WHERE job_name = $1`
	var exit *int
	if err := pool.QueryRow(ctx, `SELECT holder, expires_at > now(), last_exit_code FROM `+quoted+` WHERE job_name = $1`, row).Scan(&holder, &live, &exit); err != nil ||
		holder != "b" || !live || exit != nil {
		t.Fatalf("after the release: %s's holder %q, live %v, exit status %v (%v); want handed to b, no exit status", row, holder, live, exit, err)
	}
	q := &queueEntry{sb: &standby{listener: b.newListener("j")}, id: "bid", in: true}
	q.leave(ctx)
	if err := pool.QueryRow(ctx, read, row).Scan(&holder, &live); err != nil || live {
		t.Fatalf("after b left: %s's holder %q, live %v (%v); want it free", row, holder, live, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT jsonb_array_length(coalesce(queue, '[]')) FROM `+quoted+` WHERE job_name = 'j'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("after b left: %d entries in the queue (%v), want none", left, err)
	}
	payload, err := heard.wait(ctx, 10*time.Second)
	if err != nil || payload != "j" {
		t.Errorf("the job's channel heard %q (%v), want the release of j", payload, err)
	}
	next, err := store("c").TryAcquire(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx, nil)
	if next.Row() != row {
		t.Errorf("c took %s, want the %s b left", next.Row(), row)
	}
	var outcome string
	if err := pool.QueryRow(ctx, `SELECT outcome FROM `+pgx.Identifier{table + HistorySuffix}.Sanitize()+
		` WHERE holder = 'b'`).Scan(&outcome); err != nil || outcome != OutcomeCouldNotStart {
		t.Errorf("b's handoff recorded %q (%v), want %s", outcome, err, OutcomeCouldNotStart)
	}
}

// A polling standby's look, a fleet's most frequent statement, is
// planned once per connection, not at every execution: a parameter that
// a plan could fold (a job's number of slots) made PostgreSQL plan it
// anew each time, which more than doubled its cost. So it is sent in full
// (a prepared statement, on a connection of its own) and as the lease
// table's function, whose plan the backend keeps (a pooler's backend
// too, across the transactions it serves).
func TestTheQueuedLookIsPlannedOnce(t *testing.T) {
	t.Parallel()
	for _, function := range []bool{false, true} {
		t.Run(fmt.Sprintf("function=%v", function), func(t *testing.T) {
			t.Parallel()
			lookPlannedOnce(t, function)
		})
	}
}

func lookPlannedOnce(t *testing.T, function bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	// One connection, as a wrapper's, with the pool's statement cache.
	cfg := pool.Config()
	conn := session.New(session.Config{ConnConfig: cfg.ConnConfig})
	defer conn.Close()
	s, err := New(conn, append(standbyTimings, WithTable(table), WithHolder("a"))...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx, nil)
	if !function {
		s.checked.Store(&tablesChecked{})
	}
	// A fleet's table: a thousand jobs, each with a queue of nine.
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{table}.Sanitize()+` (job_name, holder, expires_at, fencing_token, queue)
SELECT 'job-' || g, 'leader', now() + interval '1 hour', g, (SELECT jsonb_agg(jsonb_build_object('id', g || '-' || i,
  'holder', 'standby-' || g || '-' || i, 'priority', 0, 'since', i, 'until', 1896000000000000, 'every', 8000000))
  FROM generate_series(1, 9) AS i)
FROM generate_series(1, 1000) AS g`); err != nil {
		t.Fatal(err)
	}
	q := &queueEntry{sb: &standby{listener: s.newListener("j")}, id: "x"}
	for range 12 {
		if _, _, err := q.look(ctx); err != nil {
			var held *HeldError
			if !errors.As(err, &held) {
				t.Fatal(err)
			}
		}
	}
	if function {
		// A generic plan the backend keeps has a memory context of its
		// own, named after its statement; a plan made for one execution
		// is gone after it.
		var kept int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_backend_memory_contexts
WHERE name = 'CachedPlan' AND ident LIKE 'SELECT holder, l.fencing_token%'`).Scan(&kept); err != nil {
			t.Fatal(err)
		}
		if kept != 1 {
			t.Errorf("12 looks through the function: %d plans of its look kept, want 1", kept)
		}
		return
	}
	var generic, custom int64
	if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
WHERE statement LIKE 'SELECT holder, l.fencing_token%'`).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	if custom > 5 || generic == 0 {
		t.Errorf("12 looks: %d custom plans, %d runs of the generic plan; want at most PostgreSQL's first 5 custom plans", custom, generic)
	}
}
