package inspect

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// Judge of a job without a schedule: a stopped run counts neither way, a
// held job (or one a standby is taking over) is not stale however old its
// last success, and a run that failed on its own is still a failure.
func TestJudgeOfAJobWithoutASchedule(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	code := func(n int) *int { return &n }
	run := func(holder, outcome string, exit *int, ago time.Duration) *Run {
		return &Run{Job: "svc", Holder: holder, Outcome: outcome, ExitCode: exit, FinishedAt: now.Add(-ago)}
	}
	stoppedA := run("A", lease.OutcomeStopped, code(143), time.Minute)
	stoppedA.By = "SIGTERM to leasewrap"
	oomA := run("A", lease.OutcomeSignalled, code(137), 2*time.Minute)
	okA := run("A", lease.OutcomeExited, code(0), 3*24*time.Hour)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	checkPolicy := Policy{MaxAge: time.Hour, FailOnLastFailure: true}
	for _, tc := range []struct {
		name   string
		facts  Facts
		policy Policy
		state  string
		reason string
	}{
		{"held, its only run stopped", Facts{Held: true, Holders: []string{"B"}, LastRun: stoppedA},
			ViewPolicy, StateHealthy, "svc is running on B; its last run on A was stopped (SIGTERM to leasewrap)"},
		{"held, its only run stopped, by the check's policy", Facts{Held: true, Holders: []string{"B"}, LastRun: stoppedA},
			checkPolicy, StateHealthy, "svc is running on B; its last run on A was stopped (SIGTERM to leasewrap)"},
		{"held, OOM-killed and then taken over", Facts{Held: true, Holders: []string{"B"}, LastRun: oomA, LastCounted: oomA},
			ViewPolicy, StateFailing, "svc last run failed, 2m0s ago (signalled 137 on A); svc is running on B"},
		{"held, OOM-killed longer ago than the policy's age", Facts{Held: true, Holders: []string{"B"}, LastRun: oomA, LastCounted: oomA},
			Policy{MaxAge: time.Minute, FailOnLastFailure: true}, StateHealthy, "svc is running on B; its newest run failed, 2m0s ago (signalled 137 on A)"},
		{"held, OOM-killed, then a rolling restart", Facts{Held: true, Holders: []string{"C"}, LastRun: stoppedA, LastCounted: oomA},
			ViewPolicy, StateFailing, "(signalled 137 on A); svc is running on C; its newest run on A was stopped (SIGTERM to leasewrap)"},
		{"held for days since its last success", Facts{Held: true, Holders: []string{"B"}, LastRun: okA, LastCounted: okA, LastSuccess: &okA.FinishedAt, LastSuccessBy: "A"},
			ViewPolicy, StateHealthy, "svc is running on B; its last run succeeded on A, 72h0m0s ago"},
		{"held, failed long after its last success", Facts{Held: true, Holders: []string{"B"}, LastRun: oomA, LastCounted: oomA, LastSuccess: &okA.FinishedAt, LastSuccessBy: "A"},
			Policy{MaxAge: time.Hour}, StateFailing, "svc last run failed, 2m0s ago (signalled 137 on A); svc is running on B"},
		{"a standby taking over", Facts{Standby: "B", LastRun: stoppedA},
			ViewPolicy, StateHealthy, "svc has no holder this moment; standby B is taking it over; its last run on A was stopped (SIGTERM to leasewrap)"},
		{"no holder, no standby, its only run stopped", Facts{LastRun: stoppedA},
			ViewPolicy, StateStale, "svc has no successful run in the history; its newest run on A was stopped (SIGTERM to leasewrap)"},
		{"no holder, stopped after a recent success", Facts{LastRun: stoppedA, LastCounted: run("A", lease.OutcomeExited, code(0), time.Hour), LastSuccess: at(time.Hour), LastSuccessBy: "A"},
			checkPolicy, StateHealthy, "svc last succeeded 1h0m0s ago on A"},
		{"no holder, stopped after a failure", Facts{LastRun: stoppedA, LastCounted: oomA, LastSuccess: at(30 * time.Minute), LastSuccessBy: "A"},
			checkPolicy, StateFailing, "svc last run failed, 2m0s ago (signalled 137 on A); its newest run on A was stopped (SIGTERM to leasewrap)"},
		{"no holder, last success too old", Facts{LastRun: okA, LastCounted: okA, LastSuccess: &okA.FinishedAt, LastSuccessBy: "A"},
			ViewPolicy, StateStale, "svc last succeeded 72h0m0s ago, longer than 24h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.facts
			f.Job, f.Now, f.Known = "svc", now, true
			v := Judge(f, tc.policy)
			if v.State != tc.state || !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("Judge = %s: %q, want %s, saying %q", v.State, v.Reason, tc.state, tc.reason)
			}
		})
	}
}

// A standby counts as taking over for TakeoverBound after the lease came
// free, and only the first of the queue.
func TestTakingOver(t *testing.T) {
	t.Parallel()
	queue := []lease.Standby{{Holder: "B"}, {Holder: "C"}}
	for _, tc := range []struct {
		queue []lease.Standby
		ago   time.Duration
		want  string
	}{
		{queue, time.Second, "B"},
		{queue, TakeoverBound, "B"},
		{queue, TakeoverBound + time.Second, ""},
		{nil, time.Second, ""},
	} {
		if got := TakingOver(tc.queue, tc.ago); got != tc.want {
			t.Errorf("TakingOver(%d standbys, free for %s) = %q, want %q", len(tc.queue), tc.ago, got, tc.want)
		}
	}
}

// The summary reads a standby taking over from the lease row: a job
// whose lease came free a moment ago, with a live standby in its queue,
// is healthy, and says which standby takes it; one free for longer than
// TakeoverBound, or whose standby stopped looking, is judged as not held.
func TestSummaryReadsAStandbyTakingOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	migrate(t, pool, table)
	lt, ht := pgx.Identifier{table}.Sanitize(), schema.HistoryTable(pgx.Identifier{table}).Sanitize()
	entry := func(holder, until string) string {
		return `jsonb_build_array(jsonb_build_object('id', '` + holder + `', 'holder', '` + holder + `', 'priority', 0,
  'since', (extract(epoch FROM now()) * 1000000)::bigint, 'until', (extract(epoch FROM ` + until + `) * 1000000)::bigint))`
	}
	for _, sql := range []string{
		`INSERT INTO ` + lt + ` (job_name, holder, expires_at, fencing_token, released_at, queue) VALUES
  ('taking', 'A', now() - interval '2 seconds', 1, now() - interval '2 seconds', ` + entry("B", "now() + interval '1 minute'") + `),
  ('long-free', 'A', now() - interval '5 minutes', 1, now() - interval '5 minutes', ` + entry("B", "now() + interval '1 minute'") + `),
  ('gone-standby', 'A', now() - interval '2 seconds', 1, now() - interval '2 seconds', ` + entry("B", "now() - interval '1 second'") + `)`,
		`INSERT INTO ` + ht + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, stopped_by)
SELECT j, 'A', 1, now() - interval '1 hour', now() - interval '2 seconds', 143, 'stopped', 'SIGTERM to leasewrap'
FROM unnest(ARRAY['taking', 'long-free', 'gone-standby']) AS j`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(pool, table)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := r.Summaries(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"taking":       "healthy: taking has no holder this moment; standby B is taking it over; its last run on A was stopped (SIGTERM to leasewrap)",
		"long-free":    "stale: long-free has no successful run in the history; its newest run on A was stopped (SIGTERM to leasewrap)",
		"gone-standby": "stale: gone-standby has no successful run in the history; its newest run on A was stopped (SIGTERM to leasewrap)",
	}
	for _, js := range jobs {
		if got := js.Verdict.State + ": " + js.Verdict.Reason; got != want[js.Job] {
			t.Errorf("%s: %q, want %q", js.Job, got, want[js.Job])
		}
	}
	if len(jobs) != len(want) {
		t.Errorf("%d jobs, want %d", len(jobs), len(want))
	}
}
