package inspect

import (
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/lease"
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
	stoppedA.StoppedBy = "SIGTERM to leasewrap"
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
			ViewPolicy, StateFailing, "svc has no successful run in the history (signalled 137 on A); svc is running on B"},
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
