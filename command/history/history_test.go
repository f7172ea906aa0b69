package history

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/golden"
	"github.com/redbite/leasewrap/lease"
)

// The timeline of a fixed set of runs: two holders of a one-slot job with
// a double run and a gap, a two-slot job, and a scheduled job with a time
// skipped while its run went on and an outage summarised as missed: those
// are marks in their own lane, no runs, no holder's and no double run.
func TestTimelineGolden(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	m := func(min float64) time.Time { return at.Add(time.Duration(min * float64(time.Minute))) }
	code := func(c int) *int { return &c }
	runs := []inspect.Run{
		{Job: "nightly_report", Slot: 1, Holder: "host-a", FencingToken: 101, StartedAt: m(0), FinishedAt: m(10), ExitCode: code(0), Outcome: lease.OutcomeExited},
		{Job: "nightly_report", Slot: 1, Holder: "host-b", FencingToken: 102, StartedAt: m(12), FinishedAt: m(20), Outcome: lease.OutcomeLost},
		{Job: "nightly_report", Slot: 1, Holder: "host-a", FencingToken: 103, StartedAt: m(22.5), FinishedAt: m(30), ExitCode: code(1), Outcome: lease.OutcomeExited},
		{Job: "nightly_report", Slot: 1, Holder: "host-c\x1b[2J", FencingToken: 104, StartedAt: m(27), FinishedAt: m(33), ExitCode: code(143), Outcome: lease.OutcomeSignalled},
		{Job: "nightly_report", Slot: 1, Holder: "host-b", FencingToken: 105, StartedAt: m(50), FinishedAt: m(60), Outcome: "running"},
		{Job: "workers", Slot: 1, Holder: "host-a", FencingToken: 201, StartedAt: m(5), FinishedAt: m(40), ExitCode: code(0), Outcome: lease.OutcomeExited},
		{Job: "workers", Slot: 2, Holder: "host-b", FencingToken: 202, StartedAt: m(6), FinishedAt: m(25), ExitCode: code(143), Outcome: lease.OutcomeStopped},
		{Job: "workers", Slot: 2, Holder: "host-c", FencingToken: 203, StartedAt: m(26), FinishedAt: m(26.1), ExitCode: code(127), Outcome: lease.OutcomeCouldNotStart},
		{Job: "workers", Slot: 2, Holder: "host-c", FencingToken: 204, StartedAt: m(30), FinishedAt: m(45), Outcome: "vanished"},
		{Job: "every_10m", Slot: 1, Holder: "host-a", FencingToken: 301, StartedAt: m(0), FinishedAt: m(14), ExitCode: code(0), Outcome: lease.OutcomeExited},
		{Job: "every_10m", Slot: 1, Holder: "host-b", StartedAt: m(10), FinishedAt: m(10), Outcome: lease.OutcomeSkipped},
		{Job: "every_10m", Slot: 1, Holder: "host-b", StartedAt: m(20), FinishedAt: m(40), Outcome: lease.OutcomeMissed},
		{Job: "every_10m", Slot: 1, Holder: "host-b", FencingToken: 302, StartedAt: m(50), FinishedAt: m(52), ExitCode: code(0), Outcome: lease.OutcomeExited},
	}
	var b bytes.Buffer
	if err := printTimeline(&b, runs, at, m(60), 60); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(b.String(), '\x1b') {
		t.Error("timeline printed a terminal control")
	}
	golden.Check(t, "timeline.txt", b.String())
}

// Every column a lane draws a run in counts it in the runs lane, a run
// shorter than a column and one ending on a column's edge too; and the
// axis names round times at a regular interval, each in its own column.
func TestTimelineShortRunsAndEvenAxis(t *testing.T) {
	from := time.Date(2026, 3, 1, 16, 15, 20, 0, time.UTC)
	to := from.Add(5 * time.Minute)
	s := func(sec float64) time.Time { return from.Add(time.Duration(sec * float64(time.Second))) }
	code := func(c int) *int { return &c }
	runs := []inspect.Run{
		{Job: "j", Slot: 1, Holder: "a", StartedAt: s(0), FinishedAt: s(25), ExitCode: code(0), Outcome: lease.OutcomeExited},
		{Job: "j", Slot: 1, Holder: "b", StartedAt: s(40.5), FinishedAt: s(41), ExitCode: code(1), Outcome: lease.OutcomeExited},
		{Job: "j", Slot: 1, Holder: "a", StartedAt: s(100), FinishedAt: s(100), ExitCode: code(0), Outcome: lease.OutcomeExited},
		{Job: "j", Slot: 1, Holder: "b", StartedAt: s(200.1), FinishedAt: s(200.2), ExitCode: code(127), Outcome: lease.OutcomeCouldNotStart},
	}
	var b bytes.Buffer
	const width = 72
	if err := printTimeline(&b, runs, from, to, width); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	lane := func(name string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "  "+name+" ") {
				return l[strings.Index(l, "|")+1 : strings.LastIndex(l, "|")]
			}
		}
		t.Fatalf("no %s lane in\n%s", name, b.String())
		return ""
	}
	count := lane("runs")
	for _, h := range []string{"a", "b"} {
		for i, c := range lane(h) {
			if c != ' ' && count[i] == '.' {
				t.Errorf("column %d: %s's lane shows %q, the runs lane '.':\n%s", i, h, c, b.String())
			}
		}
	}
	// The labels: the line after the job's name.
	step := to.Sub(from) / width
	pad := laneNameWidth + 2
	var prev time.Time
	var gaps []time.Duration
	for i, f := range strings.Fields(lines[3]) {
		at, err := time.Parse("15:04:05", f)
		if err != nil {
			at, err = time.Parse("15:04", f)
		}
		if err != nil {
			t.Fatalf("label %q: %v\n%s", f, err, b.String())
		}
		at = time.Date(2026, 3, 1, at.Hour(), at.Minute(), at.Second(), 0, time.UTC)
		col := strings.Index(lines[3][pad:], f) - 1
		if want := int(at.Sub(from) / step); col != want {
			t.Errorf("label %s in column %d, want %d", f, col, want)
		}
		if i > 0 {
			gaps = append(gaps, at.Sub(prev))
		}
		prev = at
	}
	if len(gaps) < 2 || slices.ContainsFunc(gaps, func(g time.Duration) bool { return g != gaps[0] }) {
		t.Errorf("labels %q are not evenly spaced (gaps %v)", lines[3], gaps)
	}
}

// --since reads a positive duration back from now, or a date or time; a
// duration of none or less says it must be positive.
func TestSinceReadsDurationsAndDates(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for text, want := range map[string]time.Time{"90m": now.Add(-90 * time.Minute), "2026-02-27": time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC)} {
		if got, err := parseSince(text, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"0s", "-5m"} {
		if _, err := parseSince(text, now); err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("parseSince(%q): %v, want it refused as not positive", text, err)
		}
	}
}

// A scheduled time nobody ran is shown as what it is, a time due, not as a
// run with token 0, attempt 1 and 0s.
func TestHistoryTableShowsTimesNotRunAsTimes(t *testing.T) {
	due := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	code := 0
	runs := []inspect.Run{
		{Job: "nightly", Holder: "a", FencingToken: 7, Attempt: 1, StartedAt: due.Add(time.Second), FinishedAt: due.Add(3 * time.Second),
			ExitCode: &code, Outcome: lease.OutcomeExited, ScheduledAt: &due, Origin: inspect.OriginSchedule},
		{Job: "nightly", Holder: "b", Attempt: 1, StartedAt: due.Add(time.Hour + time.Minute), FinishedAt: due.Add(time.Hour + time.Minute),
			Outcome: lease.OutcomeMissed, ScheduledAt: cmdutil.Ptr(due.Add(time.Hour)), Origin: inspect.OriginSchedule},
	}
	var b strings.Builder
	if err := printHistoryTable(&b, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); f[2] != "7" || f[3] != "1" {
		t.Errorf("run row %q, want token 7 and attempt 1", lines[1])
	}
	missed := strings.Fields(lines[2])
	if missed[2] != "-" || missed[3] != "-" || missed[4] != "due" || !strings.Contains(lines[2], "03:00:00") || !strings.Contains(lines[2], " missed ") {
		t.Errorf("missed row %q, want no token, attempt or duration, and the time due (03:00)", lines[2])
	}
}
