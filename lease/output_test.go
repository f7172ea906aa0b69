package lease_test

import (
	"errors"
	"testing"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// The output a run kept is written with its row by each statement that
// records a run: an attempt before a retry, the release, and a run
// recorded after a lost lease; nil keeps none, and an empty output is
// kept as empty.
func TestEveryRecordedRunKeepsItsOutput(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	if _, err := s.Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	one := 1
	l, err := s.TryAcquire(ctx(t), "retried")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.RecordAttempt(ctx(t), lease.End{ExitCode: &one, Outcome: lease.OutcomeExited, Attempt: 1, Output: []byte("first\xff")}); err != nil {
		t.Fatal(err)
	}
	if err := l.StartAttempt(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx(t), lease.End{ExitCode: &one, Outcome: lease.OutcomeExited, Attempt: 2, Output: []byte("second\x00")}); err != nil {
		t.Fatal(err)
	}
	l, err = s.TryAcquire(ctx(t), "lost")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx(t), lease.End{ExitCode: &one, Attempt: 1}); err != nil { // records no run
		t.Fatal(err)
	}
	if err := l.RecordLost(ctx(t), lease.End{ExitCode: &one, Outcome: lease.OutcomeLost, Attempt: 1, Output: []byte{}}); err != nil {
		t.Fatal(err)
	}
	l, err = s.TryAcquire(ctx(t), "silent")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx(t), lease.End{ExitCode: &one, Outcome: lease.OutcomeExited, Attempt: 1}); err != nil {
		t.Fatal(err)
	}

	r := lwtest.Reader(t, pool, table)
	for _, tc := range []struct {
		q    inspect.OutputQuery
		want string
	}{
		{inspect.OutputQuery{Job: "retried", Attempt: 1}, "first\xff"},
		{inspect.OutputQuery{Job: "retried"}, "second\x00"},
		{inspect.OutputQuery{Job: "lost"}, ""},
	} {
		if out, _, _, err := r.Output(ctx(t), tc.q); err != nil || string(out) != tc.want {
			t.Errorf("Output(%+v) = %q, %v; want %q", tc.q, out, err, tc.want)
		}
	}
	if out, _, _, err := r.Output(ctx(t), inspect.OutputQuery{Job: "silent"}); !errors.Is(err, inspect.ErrNoOutput) {
		t.Errorf("a run that kept no output: %q, %v; want ErrNoOutput", out, err)
	}
}
