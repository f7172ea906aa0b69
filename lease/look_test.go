package lease

import (
	"context"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

// A look reads a row's times bare and works out its state and time left in
// Go (readHolder): they must be what schema.HeldState and
// schema.ExpiresInMicros say of the same row, for every state, and whatever
// DateStyle the database or role sets (Connect reads times in the ISO style).
func TestLookAgreesWithTheSQLState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The options set DateStyle as a database's or role's setting would,
	// and Connect then sets it to ISO.
	pool, err := Connect(ctx, pgtest.URL()+"&options=-cdatestyle%3DSQL%2CDMY")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := New(pool, WithTable(pgtest.Table(t, pool)), WithHolder("reader"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{ // job: released_at, last_finished_at (expires_at is now() + 1 h)
		string(StateHeld):      `NULL, NULL`,
		string(StateReleasing): `now(), NULL`,
		string(StateKept):      `now(), now()`,
		string(StateReleased):  `now() + interval '2 hours', now()`,
	}
	for job, times := range rows {
		if _, err := pool.Exec(ctx, s.objects.Render(`INSERT INTO {lease}
  (job_name, holder, expires_at, fencing_token, released_at, last_finished_at)
  VALUES ($1, 'h-'||$1, now() + interval '1 hour', 7, `+times+`)`), job); err != nil {
			t.Fatal(err)
		}
	}
	for job := range rows {
		e, err := s.readHolder(ctx, pool, job)
		if err != nil {
			t.Fatal(err)
		}
		var state string
		var micros int64
		if err := pool.QueryRow(ctx, s.objects.Render(`SELECT `+schema.HeldState+`, `+schema.ExpiresInMicros+`
FROM {lease} WHERE job_name = $1`), job).Scan(&state, &micros); err != nil {
			t.Fatal(err)
		}
		if string(e.State) != job || state != job {
			t.Errorf("row %q: look says %q, SQL says %q", job, e.State, state)
		}
		if e.Holder != "h-"+job || e.Token != 7 {
			t.Errorf("row %q: look read holder %q token %d, want %q 7", job, e.Holder, e.Token, "h-"+job)
		}
		// The two reads are two statements, each with its own now().
		if d := e.ExpiresIn - time.Duration(micros)*time.Microsecond; e.ExpiresIn <= 59*time.Minute || d < 0 || d > time.Minute {
			t.Errorf("row %q: look says %s left, SQL (read after it) %s", job, e.ExpiresIn, time.Duration(micros)*time.Microsecond)
		}
	}
	e, err := s.readHolder(ctx, pool, "no-row")
	if err != nil || e.Holder != "" || e.ExpiresIn != 0 {
		t.Errorf("a job without a row: %+v, %v; want no holder, no time left", e, err)
	}
}
