package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A standby that leaves the queue (it was told to stop) just as a release
// hands it the lease frees the lease, says so on the job's channel as a
// release does, and the next take records the handoff could_not_start:
// a fleet stopped all at once leaves no lease held for a first expiry.
func TestAStandbyLeavingFreesALeaseHandedToIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	quoted := pgx.Identifier{table}.Sanitize()
	store := func(holder string) *Store {
		s, err := New(pool, append(standbyTimings, WithTable(table), WithHolder(holder))...)
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
	// b's entry, as a polling standby's that looked a moment ago.
	if _, err := pool.Exec(ctx, `UPDATE `+quoted+` SET queue = jsonb_build_array(jsonb_build_object(
  'holder', 'b', 'id', 'bid', 'priority', 0, 'since', 1, 'until', (extract(epoch FROM now()) * 1000000)::bigint + 60000000))`); err != nil {
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
	if err := pool.QueryRow(ctx, `SELECT holder, expires_at > now() FROM `+quoted).Scan(&holder, &live); err != nil || holder != "b" || !live {
		t.Fatalf("after the release: holder %q, live %v (%v); want handed to b", holder, live, err)
	}
	q := &queueEntry{sb: &standby{listener: b.newListener("j")}, id: "bid", in: true}
	q.leave(ctx)
	if err := pool.QueryRow(ctx, `SELECT holder, expires_at > now() FROM `+quoted).Scan(&holder, &live); err != nil || live {
		t.Fatalf("after b left: holder %q, live %v (%v); want the lease free", holder, live, err)
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
	var outcome string
	if err := pool.QueryRow(ctx, `SELECT outcome FROM `+pgx.Identifier{table + HistorySuffix}.Sanitize()+
		` WHERE holder = 'b'`).Scan(&outcome); err != nil || outcome != OutcomeCouldNotStart {
		t.Errorf("b's handoff recorded %q (%v), want %s", outcome, err, OutcomeCouldNotStart)
	}
}
