package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
)

// defaultHistoryLimit is how many runs history shows unless told.
const defaultHistoryLimit = 100

// defaultTimelineWidth is how many columns a timeline's lanes have.
const defaultTimelineWidth = 72

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "show finished runs, newest first, or with --timeline who ran each job when",
		UsageText: "leasewrap history [--job NAME] [--since D] [--limit N] [--json | --timeline [--width N]]",
		Flags: append([]cli.Flag{
			jobFlag("show only this job"),
			&cli.StringFlag{Name: "since", Usage: "only runs that finished in the last D (24h), or since a time (2026-03-01 or RFC 3339)"},
			&cli.StringFlag{Name: "limit", Value: strconv.Itoa(defaultHistoryLimit), Usage: "show at most N runs (0: all)"},
			jsonFlag("print a JSON array for scripts"),
			&cli.BoolFlag{Name: "timeline", Usage: "draw one lane per holder over the period, so that double runs and gaps show"},
			&cli.StringFlag{Name: "width", Value: strconv.Itoa(defaultTimelineWidth), Usage: "with --timeline: columns of the time axis"},
		}, storeFlags()...),
		OnUsageError: usageError,
		Action:       historyAction,
	}
}

// historyOptions are history's settings, parsed and checked.
type historyOptions struct {
	query    inspect.HistoryQuery
	json     bool
	timeline bool
	width    int
}

func parseHistoryOptions(c *cli.Context, now time.Time) (historyOptions, error) {
	s := newSettings(c)
	o := historyOptions{json: c.Bool("json"), timeline: c.Bool("timeline")}
	var err error
	if o.query.Job, err = parseJob(s, false); err != nil {
		return o, err
	}
	if o.json && o.timeline {
		return o, usagef("--json and --timeline do not go together: pick one")
	}
	if o.query.Limit, err = strconv.Atoi(c.String("limit")); err != nil || o.query.Limit < 0 {
		return o, usagef("invalid %s %q: must be a number, 0 for all", s.source("limit"), c.String("limit"))
	}
	if o.width, err = strconv.Atoi(c.String("width")); err != nil || o.width < 10 || o.width > 1000 {
		return o, usagef("invalid %s %q: must be a number 10-1000", s.source("width"), c.String("width"))
	}
	if since := c.String("since"); since != "" {
		if o.query.Since, err = parseSince(since, now); err != nil {
			return o, usagef("invalid %s %q: %v", s.source("since"), since, err)
		}
	}
	return o, nil
}

// parseSince reads a duration back from now, or a date or time.
func parseSince(text string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(text); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a duration such as 24h or 90m, a date such as 2026-03-01, or an RFC 3339 time")
}

func historyAction(c *cli.Context) error {
	now := time.Now()
	o, err := parseHistoryOptions(c, now)
	if err != nil {
		return err
	}
	a, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer a.db.close()
	runs, err := a.read.History(c.Context, o.query)
	switch {
	// No lease table (a mistyped --table), or a history that cannot be
	// read: said in one line, not shown as an empty history.
	case errors.Is(err, inspect.ErrNoTable), errors.Is(err, inspect.ErrNoHistory), errors.Is(err, lease.ErrHistoryUnavailable):
		return &exitError{code: exitUnavailable, err: a.db.redact.errorf(err)}
	case err != nil:
		return a.db.unavailable(err, a.log)
	}
	var print func(io.Writer) error
	switch {
	case o.json:
		print = func(w io.Writer) error { return printHistoryJSON(w, runs) }
	case o.timeline:
		// Leases held now are runs that have not finished: draw them up to now.
		if jobs, err := a.read.Status(c.Context, o.query.Job); err == nil {
			runs = append(runs, runningRuns(jobs, now)...)
		}
		from := o.query.Since
		if from.IsZero() {
			from = earliestStart(runs)
		}
		print = func(w io.Writer) error { return printTimeline(w, runs, from, now, o.width) }
	default:
		print = func(w io.Writer) error { return printHistoryTable(w, runs) }
	}
	if err := print(c.App.Writer); err != nil {
		return &exitError{code: exitIOErr, err: fmt.Errorf("cannot write history: %w", err)}
	}
	return nil
}

// outcomeRunning marks, in a timeline, a run whose lease is held now.
const outcomeRunning = "running"

// runningRuns are the live leases among jobs, as runs that end now.
func runningRuns(jobs []inspect.JobStatus, now time.Time) []inspect.Run {
	var out []inspect.Run
	for _, j := range jobs {
		if (j.State == lease.StateHeld || j.State == lease.StateReleasing) && j.LastStarted != nil {
			out = append(out, inspect.Run{Job: j.Job, Slot: max(j.Slot, 1), Holder: j.Holder, FencingToken: j.FencingToken,
				Attempt: 1, StartedAt: *j.LastStarted, FinishedAt: now, Outcome: outcomeRunning})
		}
	}
	return out
}

func earliestStart(runs []inspect.Run) time.Time {
	var t time.Time
	for _, r := range runs {
		if t.IsZero() || r.StartedAt.Before(t) {
			t = r.StartedAt
		}
	}
	return t
}

// historyJSON is the stable JSON shape of one run in `history --json`.
type historyJSON struct {
	Job             string    `json:"job"`
	Slot            int       `json:"slot"`
	Holder          string    `json:"holder"`
	FencingToken    int64     `json:"fencing_token"`
	Attempt         int       `json:"attempt"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	ExitCode        *int      `json:"exit_code"`
	Outcome         string    `json:"outcome"`
}

func printHistoryJSON(w io.Writer, runs []inspect.Run) error {
	out := make([]historyJSON, 0, len(runs))
	for _, r := range runs {
		out = append(out, historyJSON{Job: r.Job, Slot: r.Slot, Holder: r.Holder, FencingToken: r.FencingToken,
			Attempt: r.Attempt, StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt.UTC(),
			DurationSeconds: runDuration(r).Seconds(), ExitCode: r.ExitCode, Outcome: r.Outcome})
	}
	return escape.JSON(w, out)
}

func runDuration(r inspect.Run) time.Duration {
	return max(r.FinishedAt.Sub(r.StartedAt), 0).Round(time.Millisecond)
}

func printHistoryTable(w io.Writer, runs []inspect.Run) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	slotted := slices.ContainsFunc(runs, func(r inspect.Run) bool { return r.Slot > 1 })
	if slotted {
		fmt.Fprint(tw, "JOB\tSLOT\t")
	} else {
		fmt.Fprint(tw, "JOB\t")
	}
	fmt.Fprintln(tw, "HOLDER\tTOKEN\tATTEMPT\tSTARTED\tDURATION\tEXIT\tOUTCOME")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t", printable(r.Job))
		if slotted {
			fmt.Fprintf(tw, "%d\t", r.Slot)
		}
		exit := "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", printable(r.Holder), r.FencingToken, r.Attempt,
			r.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), runDuration(r), exit, printable(r.Outcome))
	}
	return tw.Flush()
}

// timelineMarks end a run's bar in a timeline, by outcome. Plain
// characters, so that it reads the same without colour, in a log file and
// in a mail from cron.
var timelineMarks = []struct {
	outcome, mark, legend string
}{
	{lease.OutcomeExited, "]", "exited 0"},
	{"", "E", "exited non-zero"},
	{lease.OutcomeSignalled, "S", "signalled"},
	{lease.OutcomeLost, "L", "lost"},
	{lease.OutcomeStopped, "X", "stopped"},
	{lease.OutcomeCouldNotStart, "!", "could not start"},
	{lease.OutcomeTimedOut, "T", "timed out"},
	{outcomeRunning, ">", "running"},
}

func timelineMark(r inspect.Run) byte {
	if r.Outcome == lease.OutcomeExited && !r.Succeeded() {
		return 'E'
	}
	for _, m := range timelineMarks {
		if m.outcome != "" && m.outcome == r.Outcome {
			return m.mark[0]
		}
	}
	return '?' // an outcome this version does not know
}

// laneNameWidth bounds the holder column of a timeline.
const laneNameWidth = 24

// printTimeline draws, for each job, one lane per holder over [from, to]
// in width columns: '=' while a run held its slot, ended by a mark for its
// outcome, and a "runs" lane counting the runs at each column's middle
// ('.' for none), so a gap or a double run shows at a glance. Runs of one
// slot that overlap in time are listed under the job.
func printTimeline(w io.Writer, runs []inspect.Run, from, to time.Time, width int) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs in the history for this period")
		return err
	}
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	step := to.Sub(from) / time.Duration(width)
	col := func(t time.Time) int { return min(max(int(t.Sub(from)/max(step, 1)), 0), width-1) }
	var jobs []string
	byJob := map[string][]inspect.Run{}
	for _, r := range runs {
		if r.FinishedAt.Before(from) || r.StartedAt.After(to) {
			continue
		}
		if _, ok := byJob[r.Job]; !ok {
			jobs = append(jobs, r.Job)
		}
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	slices.Sort(jobs)
	var b strings.Builder
	fmt.Fprintf(&b, "%s .. %s, one column = %s\n", stamp(from), stamp(to), roundStep(step))
	pad := strings.Repeat(" ", laneNameWidth+2)
	for _, job := range jobs {
		jr := byJob[job]
		slices.SortStableFunc(jr, func(a, b inspect.Run) int { return a.StartedAt.Compare(b.StartedAt) })
		fmt.Fprintf(&b, "\n%s\n%s%s\n%s%s\n", printable(job), pad, labels(from, step, width), pad, ruler(width))
		drawLanes(&b, jr, from, step, width, col)
		for _, o := range overlaps(jr) {
			fmt.Fprintf(&b, "  overlap: %s\n", o)
		}
	}
	b.WriteString("\n")
	for i, m := range timelineMarks {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s %s", m.mark, m.legend)
	}
	b.WriteString("  = holding the lease\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// drawLanes draws one job's lanes, one per holder, and the runs lane that
// counts the runs at each column's middle.
func drawLanes(b *strings.Builder, jr []inspect.Run, from time.Time, step time.Duration, width int, col func(time.Time) int) {
	var holders []string
	lanes := map[string][]byte{}
	for _, r := range jr {
		lane, ok := lanes[r.Holder]
		if !ok {
			holders = append(holders, r.Holder)
			lane = []byte(strings.Repeat(" ", width))
			lanes[r.Holder] = lane
		}
		start, end := col(r.StartedAt), col(r.FinishedAt)
		for i := start; i < end; i++ {
			lane[i] = '='
		}
		lane[end] = timelineMark(r)
	}
	for _, h := range holders {
		fmt.Fprintf(b, "  %-*s|%s|\n", laneNameWidth, laneName(h), lanes[h])
	}
	counts := make([]byte, width)
	for i := range counts {
		mid := from.Add(step*time.Duration(i) + step/2)
		n := 0
		for _, r := range jr {
			if !r.StartedAt.After(mid) && r.FinishedAt.After(mid) {
				n++
			}
		}
		counts[i] = countMark(n)
	}
	fmt.Fprintf(b, "  %-*s|%s|\n", laneNameWidth, "runs", counts)
}

func countMark(n int) byte {
	switch {
	case n == 0:
		return '.'
	case n < 10:
		return byte('0' + n)
	}
	return '+'
}

// ruler marks every tenth column, under its time in labels.
func ruler(width int) string {
	r := []byte(strings.Repeat("-", width))
	for i := 10; i < width; i += 10 {
		r[i] = '+'
	}
	return "+" + string(r) + "+"
}

// labels prints the time at the start of the lanes and at every tenth
// column, in as few characters as the period needs.
func labels(from time.Time, step time.Duration, width int) string {
	layout := "15:04"
	switch {
	case step*time.Duration(width) > 48*time.Hour:
		layout = "Jan 02"
	case step*10 < time.Minute:
		layout = "15:04:05"
	}
	line := []byte(strings.Repeat(" ", width+2))
	for i := 0; i < width; i += 10 {
		label := from.Add(step * time.Duration(i)).UTC().Format(layout)
		if i+1+len(label) <= len(line) {
			copy(line[i+1:], label) // column i of the lanes is at i+1, after the "|"
		}
	}
	return strings.TrimRight(string(line), " ")
}

func laneName(holder string) string {
	name := printable(holder)
	if len(name) > laneNameWidth {
		name = name[:laneNameWidth-1] + "~"
	}
	return name
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

func roundStep(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// overlaps lists the runs of one slot that ran at the same time: for a job
// with one slot, a double run.
func overlaps(runs []inspect.Run) []string {
	var out []string
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.Slot != b.Slot || !b.StartedAt.Before(a.FinishedAt) || !a.StartedAt.Before(b.FinishedAt) {
				continue
			}
			end := a.FinishedAt
			if b.FinishedAt.Before(end) {
				end = b.FinishedAt
			}
			both := end.Sub(b.StartedAt)
			out = append(out, fmt.Sprintf("slot %d: %s (token %d) and %s (token %d) ran together for %s from %s",
				a.Slot, printable(a.Holder), a.FencingToken, printable(b.Holder), b.FencingToken,
				both.Round(time.Millisecond), stamp(b.StartedAt)))
		}
	}
	return out
}
