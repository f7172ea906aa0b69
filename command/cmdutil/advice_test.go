package cmdutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redbite/leasewrap/lease"
)

// Package lease states why it refuses a job's run, naming no flag and no
// subcommand; Advised adds what to do in the command line's words, after
// the facts, and the error still matches lease's.
func TestAdvisedSaysWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&lease.ScheduleError{Job: "j", Want: "0 3 * * *", Found: "CRON_TZ=Europe/Berlin 0 3 * * *"},
			`job "j" runs on schedule "CRON_TZ=Europe/Berlin 0 3 * * *" (recorded in its lease row), this instance has "0 3 * * *": ` +
				`start every instance of it with the same --schedule and --timezone; to change the job's schedule, ` +
				`leasewrap reschedule --job j --schedule '0 3 * * *'`},
		{&lease.ScheduleError{Job: "it's", Want: "CRON_TZ=Europe/Berlin @daily", Found: "CRON_TZ=Europe/Berlin @daily", ZoneData: true},
			`job "it's" runs on schedule "CRON_TZ=Europe/Berlin @daily" computed with other zone data than this host's ` +
				`(another offset for Europe/Berlin in the years ahead): every instance of a job must compute the same times; ` +
				`give them all the same zone data (the same tzdata package, or ZONEINFO naming one copy); to move the job to this host's, ` +
				`stop the instances with the other, then leasewrap reschedule --job 'it'\''s' --schedule 'CRON_TZ=Europe/Berlin @daily'`},
		{&lease.SlotsError{Job: "pool", Table: `"t"`, Want: 2, Row: "pool#2"},
			`job "pool" with 2 slots would use lease row "pool#2", which belongs to another job: rename one of the two jobs`},
		{&lease.SlotsError{Job: "pool", Table: `"t"`, Want: 2, Found: 1},
			`job "pool" is held by an instance with one slot, this one has 2: start every instance of it with the same --slots ` +
				`(a job with one slot may move to more while no instance holds it)`},
		{fmt.Errorf("cannot take: %w", &lease.SlotsError{Job: "o'k", Table: `"t"`, Want: 3, Found: 2}),
			`cannot take: job "o'k" runs with 2 slots (recorded in its lease rows), this instance has 3: start every instance of it ` +
				`with --slots 2; to change the number, stop them all, then UPDATE "t" SET slots = NULL WHERE job_name = 'o''k'`},
		{&lease.NotScheduledError{Job: "j", Table: `"t"`, NoRow: true},
			`job "j" has no lease row in "t": no schedule recorded (start its schedulers with --schedule first)`},
		{&lease.NotScheduledError{Job: "j", Table: `"t"`},
			`job "j" has no schedule recorded: no scheduler would run it (start its schedulers with --schedule)`},
	} {
		if strings.Contains(tc.err.Error(), "--") || strings.Contains(tc.err.Error(), "leasewrap ") {
			t.Errorf("lease's refusal names a flag or a subcommand: %v", tc.err)
		}
		got := Advised(tc.err)
		if got.Error() != tc.want {
			t.Errorf("Advised:\n got %s\nwant %s", got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Advised(%v) no longer matches it", tc.err)
		}
	}
	other := errors.New("connection refused")
	if got := Advised(other); got.Error() != other.Error() || !errors.Is(got, other) {
		t.Errorf("Advised(%v) = %v, want it as it is", other, got)
	}
}
