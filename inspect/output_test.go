package inspect_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// Output reads the output a chosen run kept, byte for byte, and the newest
// run that kept any when no run is chosen; History says how much each run
// kept and for which scheduled time it ran.
func TestOutputOfAChosenRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.Pool(t)
	nsp := pgtest.Table(t, admin)
	q := pgx.Identifier{nsp}.Sanitize()
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), `DROP SCHEMA `+q+` CASCADE`) })
	table := nsp + ".lease"
	s, err := lease.New(admin, lease.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	history := pgx.Identifier{nsp, "lease_history"}.Sanitize()
	if _, err := admin.Exec(ctx, `INSERT INTO `+history+`
  (job_name, holder, fencing_token, attempt, started_at, finished_at, exit_code, outcome, scheduled_at, output) VALUES
  ('job', 'a', 10, 1, now() - interval '3 min', now() - interval '3 min', 1, 'exited', now() - interval '3 min', '\x6669727374ff00'),
  ('job', 'a', 10, 2, now() - interval '2 min', now() - interval '2 min', 0, 'exited', now() - interval '3 min', 'second'),
  ('job', 'b', 11, 1, now() - interval '1 min', now() - interval '1 min', 0, 'exited', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	r, err := inspect.Open(admin, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q            inspect.OutputQuery
		want         string
		token        int64
		attempt      int
		wantNoOutput bool
	}{
		{q: inspect.OutputQuery{Job: "job"}, want: "second", token: 10, attempt: 2},
		{q: inspect.OutputQuery{Job: "job", FencingToken: 10, Attempt: 1}, want: "first\xff\x00", token: 10, attempt: 1},
		{q: inspect.OutputQuery{Job: "job", FencingToken: 11}, wantNoOutput: true},
		{q: inspect.OutputQuery{Job: "other"}, wantNoOutput: true},
	} {
		out, token, attempt, err := r.Output(ctx, tc.q)
		if tc.wantNoOutput {
			if !errors.Is(err, inspect.ErrNoOutput) {
				t.Errorf("Output(%+v) = %q, %v; want ErrNoOutput", tc.q, out, err)
			}
			continue
		}
		if err != nil || string(out) != tc.want || token != tc.token || attempt != tc.attempt {
			t.Errorf("Output(%+v) = %q (token %d, attempt %d), %v; want %q (token %d, attempt %d)",
				tc.q, out, token, attempt, err, tc.want, tc.token, tc.attempt)
		}
	}
	runs, err := r.History(ctx, inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) != 3 {
		t.Fatalf("history: %v, %v", runs, err)
	}
	if runs[0].ScheduledAt != nil || runs[0].OutputBytes != 0 || runs[1].ScheduledAt == nil || runs[1].OutputBytes != 6 ||
		runs[2].OutputBytes != 7 || !runs[1].ScheduledAt.Equal(*runs[2].ScheduledAt) {
		t.Errorf("history = %+v; want the scheduled time of the first lease's two attempts and the sizes 0, 6, 7", runs)
	}
}
