package inspect

import (
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/lease"
)

// A job with a schedule is judged by its latest due time and how it is
// accounted for: a time paused by an operator, or skipped while the run
// before it went on, asks nothing once the pause is over; a time due
// before the job's schedule was recorded was owed by nobody; a time due
// after it that nobody accounted for is overdue, however the job began;
// a run leasewrap was asked to stop is no failure.
func TestJudgeScheduledTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 16, 25, 0, 0, time.UTC)
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	zero, one, sigterm := 0, 1, 143
	notRun := func(outcome, by string) *Run {
		r := &Run{Job: "tick", Holder: by, Outcome: outcome, StartedAt: now.Add(-time.Minute), FinishedAt: now.Add(-time.Minute)}
		r.noHolder()
		return r
	}
	ran := func(code *int) *Run {
		return &Run{Job: "tick", Holder: "host-a", Outcome: lease.OutcomeExited, ExitCode: code, StartedAt: now.Add(-time.Minute), FinishedAt: now}
	}
	for _, tc := range []struct {
		name     string
		schedule string
		due      *Account
		since    *time.Time
		paused   *lease.Pause
		state    string
		reason   string
	}{
		{name: "paused time, resumed", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.OutcomePaused, By: "root@vm", Run: notRun(lease.OutcomePaused, "root@vm")},
			state: StateHealthy, reason: "tick: the time due at 2026-12-07 16:24:00Z was paused by root@vm; nothing was owed"},
		{name: "paused time whose claim is gone", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Run: notRun(lease.OutcomePaused, "root@vm")},
			state: StateHealthy, reason: "was paused by root@vm; nothing was owed"},
		{name: "paused time without its history row", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.OutcomePaused, By: "root@vm"},
			state: StateHealthy, reason: "was paused by root@vm"},
		{name: "paused time, still paused", schedule: "* * * * *",
			due:    &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.OutcomePaused, By: "root@vm", Run: notRun(lease.OutcomePaused, "root@vm")},
			paused: &lease.Pause{By: "root@vm", Since: now.Add(-2 * time.Minute)},
			state:  StatePaused, reason: "tick is paused by root@vm"},
		{name: "skipped time", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.OutcomeSkipped, By: "host-a", Run: notRun(lease.OutcomeSkipped, "host-a")},
			state: StateHealthy, reason: "was skipped: the run before it still held the lease"},
		{name: "missed time", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.OutcomeMissed, By: "host-b", Run: notRun(lease.OutcomeMissed, "host-b")},
			state: StateMissed, reason: "was missed"},
		{name: "failed run", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.ClaimRun, By: "host-a", Run: ran(&one)},
			state: StateFailing, reason: "the run of the time due at 2026-12-07 16:24:00Z failed (exited 1 on host-a)"},
		{name: "run stopped by a signal to its scheduler", schedule: "* * * * *",
			due: &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.ClaimRun, By: "host-a",
				Run: &Run{Job: "tick", Holder: "host-a", Outcome: lease.OutcomeStopped, ExitCode: &sigterm, By: "SIGTERM to leasewrap", FinishedAt: now}},
			state: StateHealthy, reason: "the run of the time due at 2026-12-07 16:24:00Z was stopped on host-a (SIGTERM to leasewrap): leasewrap was asked to stop it"},
		{name: "succeeded run", schedule: "* * * * *",
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.ClaimRun, By: "host-a", Run: ran(&zero)},
			state: StateHealthy, reason: "ran and succeeded on host-a"},
		{name: "daily job scheduled in the afternoon", schedule: "0 2 * * *", since: at("2026-12-07T16:20:00Z"),
			due:   &Account{At: *at("2026-12-07T02:00:00Z")},
			state: StateHealthy, reason: "tick has no scheduled time due since it was scheduled at 2026-12-07 16:20:00Z"},
		{name: "time due before a reschedule", schedule: "*/10 * * * *", since: at("2026-12-07T16:24:30Z"),
			due:   &Account{At: *at("2026-12-07T16:20:00Z")},
			state: StateHealthy, reason: "since it was scheduled at 2026-12-07 16:24:30Z"},
		{name: "time due after the schedulers stopped", schedule: "* * * * *", since: at("2026-12-07T16:20:00Z"),
			due:   &Account{At: *at("2026-12-07T16:24:00Z")},
			state: StateOverdue, reason: "was not run, and no instance recorded it missed"},
		{name: "time due at the moment it was scheduled", schedule: "* * * * *", since: at("2026-12-07T16:24:00Z"),
			due:   &Account{At: *at("2026-12-07T16:24:00Z")},
			state: StateOverdue, reason: "was not run"},
		{name: "time before it was scheduled that was run anyway", schedule: "* * * * *", since: at("2026-12-07T16:24:20Z"),
			due:   &Account{At: *at("2026-12-07T16:24:00Z"), Claim: lease.ClaimRun, By: "host-a", Run: ran(&one)},
			state: StateFailing, reason: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Facts{Job: "tick", Now: now, Known: true, Schedule: tc.schedule, Due: tc.due, ScheduledSince: tc.since, Paused: tc.paused}
			v := Judge(f, ViewPolicy)
			if v.State != tc.state || !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("Judge: %s %q, want %s with %q", v.State, v.Reason, tc.state, tc.reason)
			}
			if tc.state != StateHealthy && strings.Contains(v.Reason, "no scheduled time due") {
				t.Errorf("Judge: %q", v.Reason)
			}
		})
	}
}

// A scheduled time nobody ran has no holder: the history's holder of its
// row is who accounted for it, and reads as By.
func TestNotRunHasNoHolder(t *testing.T) {
	t.Parallel()
	for _, outcome := range []string{lease.OutcomePaused, lease.OutcomeSkipped, lease.OutcomeMissed} {
		r := Run{Holder: "root@vm", Outcome: outcome}
		r.noHolder()
		if r.Holder != "" || r.By != "root@vm" {
			t.Errorf("%s: holder %q, by %q; want none, root@vm", outcome, r.Holder, r.By)
		}
	}
	r := Run{Holder: "host-a", Outcome: lease.OutcomeExited}
	r.noHolder()
	if r.Holder != "host-a" || r.By != "" {
		t.Errorf("a run: holder %q, by %q; want host-a and none", r.Holder, r.By)
	}
}
