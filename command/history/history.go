package history

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/timeline"
)

// defaultHistoryLimit is how many runs history shows unless told.
const defaultHistoryLimit = 100

// defaultTimelineWidth is how many columns a timeline's lanes have.
const defaultTimelineWidth = 72

// Command is the history subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "show finished runs, newest first, or with --timeline who ran each job when, or with --output what a run printed",
		UsageText: "leasewrap history [--job NAME] [--since D] [--limit N] [--json | --timeline [--width N]]\nleasewrap history --job NAME --output [--token N [--attempt N]] [--raw]",
		Flags: append([]cli.Flag{
			cmdutil.JobFlag("show only this job"),
			&cli.StringFlag{Name: "since", Usage: "only runs that finished in the last D (24h), or since a time (2026-03-01 or RFC 3339)"},
			&cli.StringFlag{Name: "limit", Value: strconv.Itoa(defaultHistoryLimit), Usage: "show at most N runs (0: all)"},
			cmdutil.JSONFlag("print a JSON array for scripts"),
			&cli.BoolFlag{Name: "timeline", Usage: "draw one lane per holder over the period, so that double runs and gaps show"},
			&cli.StringFlag{Name: "width", Value: strconv.Itoa(defaultTimelineWidth), Usage: "with --timeline: columns of the time axis"},
			&cli.BoolFlag{Name: "output", Usage: "print the output the job's latest run kept (--keep-output) to stdout, as it was written, with terminal controls escaped on a terminal; exit 1 when no run kept any"},
			&cli.BoolFlag{Name: "raw", Usage: "with --output: write the bytes as they were kept even to a terminal, escape sequences included (to a pipe or a file they always are)"},
			&cli.StringFlag{Name: "token", Usage: "with --output: the run with this fencing token"},
			&cli.StringFlag{Name: "attempt", Usage: "with --output: this attempt of the run (default: its last that kept output)"},
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       historyAction,
	}
}

// historyOptions are history's settings, parsed and checked.
type historyOptions struct {
	query    inspect.HistoryQuery
	json     bool
	timeline bool
	width    int
	// output, when set, asks for what one run kept of its output; raw,
	// for its bytes as kept even on a terminal.
	output *inspect.OutputQuery
	raw    bool
}

func parseHistoryOptions(c *cli.Context, now time.Time) (historyOptions, error) {
	s := cmdutil.NewSettings(c)
	o := historyOptions{json: c.Bool("json"), timeline: c.Bool("timeline"), raw: c.Bool("raw")}
	var err error
	if o.query.Job, err = cmdutil.ParseJob(s); err != nil {
		return o, err
	}
	if o.json && o.timeline {
		return o, cmdutil.Usagef("--json and --timeline do not go together: pick one")
	}
	if o.query.Limit, err = strconv.Atoi(c.String("limit")); err != nil || o.query.Limit < 0 {
		return o, cmdutil.Usagef("invalid %s %q: must be a number, 0 for all", s.Source("limit"), c.String("limit"))
	}
	if o.width, err = strconv.Atoi(c.String("width")); err != nil || o.width < 10 || o.width > 1000 {
		return o, cmdutil.Usagef("invalid %s %q: must be a number 10-1000", s.Source("width"), c.String("width"))
	}
	if since := c.String("since"); since != "" {
		if o.query.Since, err = parseSince(since, now); err != nil {
			return o, cmdutil.Usagef("invalid %s %q: %v", s.Source("since"), since, err)
		}
	}
	if o.output, err = parseOutputQuery(s, o); err != nil {
		return o, err
	}
	if o.output == nil {
		cmdutil.SayJobFromEnv(s, o.query.Job)
	}
	return o, nil
}

// parseOutputQuery reads --output and the run it picks (--token,
// --attempt): nil without --output.
func parseOutputQuery(s cmdutil.Settings, o historyOptions) (*inspect.OutputQuery, error) {
	c := s.Ctx
	if !c.Bool("output") {
		for _, name := range []string{"token", "attempt"} {
			if c.IsSet(name) {
				return nil, cmdutil.Usagef("--%s picks the run whose output --output prints: add --output", name)
			}
		}
		if o.raw {
			return nil, cmdutil.Usagef("--raw says how --output prints a run's output: add --output")
		}
		return nil, nil
	}
	switch {
	case o.query.Job == "":
		return nil, cmdutil.Usagef("--output needs --job: name the job whose run's output to print, as in --job nightly_report --output")
	case o.json || o.timeline:
		return nil, cmdutil.Usagef("--output prints one run's output as it was: it does not go with --json or --timeline")
	}
	q := &inspect.OutputQuery{Job: o.query.Job}
	if c.IsSet("token") {
		token, err := strconv.ParseInt(c.String("token"), 10, 64)
		if err != nil || token <= 0 {
			return nil, cmdutil.Usagef("invalid --token %q: must be a run's fencing token, a positive number (see leasewrap history)", c.String("token"))
		}
		q.FencingToken = token
	}
	if c.IsSet("attempt") {
		attempt, err := strconv.Atoi(c.String("attempt"))
		if err != nil || attempt <= 0 {
			return nil, cmdutil.Usagef("invalid --attempt %q: must be a number from 1", c.String("attempt"))
		}
		q.Attempt = attempt
	}
	return q, nil
}

// parseSince reads a duration back from now, or a date or time.
func parseSince(text string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(text); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("a duration back from now must be positive, such as 24h or 90m")
		}
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
	a, err := cmdutil.OpenAdmin(c)
	if err != nil {
		return err
	}
	defer a.DB.Close()
	if o.output != nil {
		return printOutput(c, a, *o.output, o.raw)
	}
	runs, err := a.Read.History(c.Context, o.query)
	switch {
	// No lease table (a mistyped --table), or a history that cannot be
	// read: said in one line, not shown as an empty history.
	case errors.Is(err, inspect.ErrNoTable), errors.Is(err, inspect.ErrNoHistory), errors.Is(err, lease.ErrHistoryUnavailable):
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: a.DB.Redact.Wrap(err)}
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	}
	var health []inspect.Verdict
	if !o.json {
		health = verdictsToShow(c, a, o.query.Job)
	}
	var print func(io.Writer) error
	switch {
	case o.json:
		print = func(w io.Writer) error { return printHistoryJSON(w, runs) }
	case o.timeline:
		// Leases held now are runs that have not finished: draw them up to now.
		if jobs, err := a.Read.Status(c.Context, o.query.Job); err == nil {
			runs = append(runs, inspect.Running(jobs, now)...)
		}
		from := o.query.Since
		if from.IsZero() {
			from = timeline.Earliest(runs)
		}
		print = func(w io.Writer) error { return printTimeline(w, runs, from, now, o.width) }
	default:
		print = func(w io.Writer) error { return printHistoryTable(w, runs) }
	}
	if err := print(c.App.Writer); err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitIOErr, Err: fmt.Errorf("cannot write history: %w", err)}
	}
	if err := printHealth(c.App.Writer, health); err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitIOErr, Err: fmt.Errorf("cannot write history: %w", err)}
	}
	return nil
}

// verdictsToShow returns the job's state, or without a job every job's
// that is not healthy, as every view judges it, in order of job name.
func verdictsToShow(c *cli.Context, a *cmdutil.Admin, job string) []inspect.Verdict {
	v := cmdutil.JudgeJobs(c.Context, a.Read, job, true)
	if v.Err != nil {
		return nil
	}
	var health []inspect.Verdict
	for _, vd := range v.ByJob {
		if job != "" || !vd.Healthy() {
			health = append(health, vd)
		}
	}
	slices.SortFunc(health, func(a, b inspect.Verdict) int { return strings.Compare(a.Job, b.Job) })
	return health
}

// printHealth writes the jobs' verdicts, one line each after a blank one:
// "health: overdue: nightly: the time due at ... was not run ...".
func printHealth(w io.Writer, health []inspect.Verdict) error {
	if len(health) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("\n")
	for _, v := range health {
		fmt.Fprintf(&b, "health: %s: %s\n", v.State, v.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printOutput writes the output a run kept to stdout, byte for byte, but
// on a terminal, unless raw, with what the terminal would act on (escape
// sequences, carriage returns, invalid UTF-8) escaped, as every other
// output of leasewrap is: a run's output may clear the screen or retitle
// the window of whoever reads it.
func printOutput(c *cli.Context, a *cmdutil.Admin, q inspect.OutputQuery, raw bool) error {
	out, _, _, err := a.Read.Output(c.Context, q)
	switch {
	case errors.Is(err, inspect.ErrNoOutput):
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("%w (runs keep their output with --keep-output SIZE)", err)}
	case errors.Is(err, inspect.ErrNoTable), errors.Is(err, inspect.ErrNoHistory), errors.Is(err, lease.ErrHistoryUnavailable):
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: a.DB.Redact.Wrap(err)}
	case err != nil:
		return a.DB.Unavailable(err, a.Log)
	}
	if f, ok := c.App.Writer.(*os.File); ok && !raw && isatty.IsTerminal(f.Fd()) {
		out = escape.Text(out)
	}
	if _, err := c.App.Writer.Write(out); err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitIOErr, Err: fmt.Errorf("cannot write the output: %w", err)}
	}
	return nil
}

// RunJSON is the stable JSON shape of one run in `history --json`.
type RunJSON struct {
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
	// ScheduledAt is null for a run without a schedule.
	ScheduledAt *time.Time `json:"scheduled_at"`
	// OutputBytes is the size of the output the run kept (history
	// --output prints it), 0 when it kept none.
	OutputBytes int `json:"output_bytes"`
	// Origin is how the run came to be: schedule, catch-up, manual or
	// plain; null when that cannot be told (its scheduled time's claim
	// is gone).
	Origin *string `json:"origin"`
	// By says who: for a run with outcome stopped, who asked for the
	// stop ("SIGTERM to leasewrap", "release by root@host"); for a
	// scheduled time nobody ran (whose holder is ""), who accounted for
	// it: who paused the job (paused), the holder whose run still held
	// the lease (skipped), the instance that recorded it (missed); null
	// for any other run, or when not known.
	By *string `json:"by"`
}

func printHistoryJSON(w io.Writer, runs []inspect.Run) error {
	out := make([]RunJSON, 0, len(runs))
	for _, r := range runs {
		out = append(out, RunJSON{Job: r.Job, Slot: r.Slot, Holder: r.Holder, FencingToken: r.FencingToken,
			Attempt: r.Attempt, StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt.UTC(),
			DurationSeconds: runDuration(r).Seconds(), ExitCode: r.ExitCode, Outcome: r.Outcome,
			ScheduledAt: timefmt.UTC(r.ScheduledAt), OutputBytes: r.OutputBytes, Origin: origin(r), By: by(r)})
	}
	return escape.JSON(w, out)
}

// origin is how r came to be, nil when that cannot be told.
func origin(r inspect.Run) *string {
	if r.Origin == "" {
		return nil
	}
	return &r.Origin
}

// by is r.By: who asked for r's stop, or who accounted for a time r
// nobody ran; nil when r records none.
func by(r inspect.Run) *string {
	if r.By == "" {
		return nil
	}
	return &r.By
}

func runDuration(r inspect.Run) time.Duration {
	return max(r.FinishedAt.Sub(r.StartedAt), 0).Round(time.Millisecond)
}

func printHistoryTable(w io.Writer, runs []inspect.Run) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	slotted := slices.ContainsFunc(runs, func(r inspect.Run) bool { return r.Slot > 1 })
	// BY says who asked for a stop, or who accounted for a scheduled
	// time nobody ran (such a row has no holder).
	byWhom := slices.ContainsFunc(runs, func(r inspect.Run) bool { return notRun(r) || r.By != "" })
	if slotted {
		fmt.Fprint(tw, "JOB\tSLOT\t")
	} else {
		fmt.Fprint(tw, "JOB\t")
	}
	fmt.Fprint(tw, "HOLDER\tTOKEN\tATTEMPT\tSTARTED\tDURATION\tEXIT\tOUTCOME\t")
	if byWhom {
		fmt.Fprint(tw, "BY\t")
	}
	fmt.Fprintln(tw, "ORIGIN")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t", escape.Printable(r.Job))
		if slotted {
			fmt.Fprintf(tw, "%d\t", r.Slot)
		}
		exit := "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		how := "-"
		if r.Origin != "" {
			how = r.Origin
		}
		holder, token, attempt, started, duration := escape.Printable(r.Holder), strconv.FormatInt(r.FencingToken, 10), strconv.Itoa(r.Attempt),
			timefmt.Stamp(r.StartedAt), runDuration(r).String()
		whom := "-"
		if r.By != "" {
			whom = escape.Printable(r.By)
		}
		if notRun(r) {
			// A scheduled time nobody ran is no run: no holder, token,
			// attempt or duration, and the time it was due.
			holder, token, attempt, started, duration = "-", "-", "-", "due "+timefmt.Stamp(dueAt(r)), "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t", holder, token, attempt, started, duration, exit, escape.Printable(r.Outcome))
		if byWhom {
			fmt.Fprintf(tw, "%s\t", whom)
		}
		fmt.Fprintf(tw, "%s\n", how)
	}
	return tw.Flush()
}

// dueAt is the scheduled time a row of a time not run stands for.
func dueAt(r inspect.Run) time.Time {
	if r.ScheduledAt != nil {
		return *r.ScheduledAt
	}
	return r.StartedAt
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
	{inspect.OutcomeRunning, ">", "running"},
	{lease.OutcomeSkipped, "s", "skipped"},
	{lease.OutcomeMissed, "m", "missed"},
	{lease.OutcomePaused, "p", "paused"},
}

// notRun reports whether r is a scheduled time that nobody ran (skipped
// while the previous run went on, missed while all instances were down,
// or paused): a mark in the job's "not run" lane, neither a run nor a
// holder's.
func notRun(r inspect.Run) bool { return lease.NotRun(r.Outcome) }

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
// slot that overlap in time are listed under the job. Scheduled times
// nobody ran are marked in a lane of their own, "not run": they are no
// runs, and count in neither the runs lane nor the overlaps.
func printTimeline(w io.Writer, runs []inspect.Run, from, to time.Time, width int) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs in the history for this period")
		return err
	}
	win := timeline.NewWindow(from, to)
	cols := win.Columns(width)
	var jobs []string
	ByJob := map[string][]inspect.Run{}
	for _, r := range runs {
		if !win.Overlaps(r.StartedAt, r.FinishedAt) {
			continue
		}
		if _, ok := ByJob[r.Job]; !ok {
			jobs = append(jobs, r.Job)
		}
		ByJob[r.Job] = append(ByJob[r.Job], r)
	}
	slices.Sort(jobs)
	ticks := axis(cols)
	var b strings.Builder
	fmt.Fprintf(&b, "%s .. %s, one column = %s\n", timefmt.Stamp(win.From), timefmt.Stamp(win.To), roundStep(cols.Step))
	pad := strings.Repeat(" ", laneNameWidth+2)
	for _, job := range jobs {
		jr := ByJob[job]
		slices.SortStableFunc(jr, func(a, b inspect.Run) int { return a.StartedAt.Compare(b.StartedAt) })
		fmt.Fprintf(&b, "\n%s\n%s%s\n%s%s\n", escape.Printable(job), pad, labels(ticks), pad, ruler(ticks, width))
		ran := slices.DeleteFunc(slices.Clone(jr), notRun)
		drawLanes(&b, ran, cols)
		drawNotRun(&b, jr, cols)
		for _, o := range overlaps(ran) {
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
// counts, in each column, the most runs at once during its time. A run's
// mark is in the column of its last instant, so a run that ends on a
// column's edge is not drawn into the next one, and the runs lane counts
// every column a run is drawn in, a run shorter than a column too.
func drawLanes(b *strings.Builder, jr []inspect.Run, cols timeline.Columns) {
	for _, l := range timeline.Lanes(jr) {
		lane := []byte(strings.Repeat(" ", cols.N))
		for _, i := range l.Runs {
			r := jr[i]
			start, end := cols.Of(r.StartedAt), cols.Of(lastInstant(r))
			for i := start; i < end; i++ {
				lane[i] = '='
			}
			lane[end] = timelineMark(r)
		}
		fmt.Fprintf(b, "  %-*s|%s|\n", laneNameWidth, laneName(l.Holder), lane)
	}
	counts := make([]byte, cols.N)
	for i := range counts {
		a := cols.Start(i)
		counts[i] = countMark(mostAtOnce(jr, a, a.Add(cols.Step)))
	}
	fmt.Fprintf(b, "  %-*s|%s|\n", laneNameWidth, "runs", counts)
}

// drawNotRun draws the lane of the scheduled times in runs that nobody
// ran, when there are any: each time's mark in its column, and across the
// columns of a long outage summarised in one missed row.
func drawNotRun(b *strings.Builder, runs []inspect.Run, cols timeline.Columns) {
	lane := []byte(strings.Repeat(" ", cols.N))
	marked := false
	for _, r := range runs {
		if !notRun(r) {
			continue
		}
		for i := cols.Of(r.StartedAt); i <= cols.Of(r.FinishedAt); i++ {
			lane[i] = timelineMark(r)
		}
		marked = true
	}
	if marked {
		fmt.Fprintf(b, "  %-*s|%s|\n", laneNameWidth, "not run", lane)
	}
}

// lastInstant is the last moment r held its slot: a run of no length has
// one.
func lastInstant(r inspect.Run) time.Time {
	if r.FinishedAt.After(r.StartedAt) {
		return r.FinishedAt.Add(-1)
	}
	return r.StartedAt
}

// mostAtOnce is the most runs that ran at the same moment in [a, b). A run
// that ends as another starts did not run with it.
func mostAtOnce(runs []inspect.Run, a, b time.Time) int {
	type event struct {
		at    time.Time
		delta int
	}
	var events []event
	for _, r := range runs {
		end := lastInstant(r).Add(1) // exclusive
		if !r.StartedAt.Before(b) || !end.After(a) {
			continue
		}
		events = append(events, event{timefmt.Later(r.StartedAt, a), 1}, event{timefmt.Earlier(end, b), -1})
	}
	// Ends before starts at the same moment.
	slices.SortFunc(events, func(x, y event) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return x.delta - y.delta
	})
	n, most := 0, 0
	for _, e := range events {
		n += e.delta
		most = max(most, n)
	}
	return most
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

// tick is a time the axis names, in the column it falls in.
type tick struct {
	col   int
	label string
}

// axis names the round times of the columns' period (timeline.Every,
// with room for each label and a gap of two) whose labels fit in the
// columns, in as few characters as the interval needs. A period too short
// for any such time gets its start.
func axis(cols timeline.Columns) []tick {
	every := timeline.Every(cols.Step, 2)
	layout := timeline.Layout(every)
	var ticks []tick
	for _, t := range cols.Drawn().Ticks(every) {
		if c := cols.Of(t); c+len(layout) <= cols.N+1 {
			ticks = append(ticks, tick{col: c, label: t.Format(layout)})
		}
	}
	if len(ticks) == 0 {
		ticks = []tick{{col: 0, label: cols.From.UTC().Format(timeline.Layout(min(every, cols.Drawn().Span())))}}
	}
	return ticks
}

// ruler marks the columns of the ticks, under their labels; the left edge
// marks the first column's.
func ruler(ticks []tick, width int) string {
	r := []byte(strings.Repeat("-", width))
	for _, t := range ticks {
		if t.col > 0 {
			r[t.col] = '+'
		}
	}
	return "+" + string(r) + "+"
}

// labels writes each tick's time from its column on; column i of the lanes
// is at i+1, after the "|".
func labels(ticks []tick) string {
	var b strings.Builder
	for _, t := range ticks {
		b.WriteString(strings.Repeat(" ", max(t.col+1-b.Len(), 0)))
		b.WriteString(t.label)
	}
	return b.String()
}

func laneName(holder string) string {
	name := escape.Printable(holder)
	if len(name) > laneNameWidth {
		name = name[:laneNameWidth-1] + "~"
	}
	return name
}

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
				a.Slot, escape.Printable(a.Holder), a.FencingToken, escape.Printable(b.Holder), b.FencingToken,
				both.Round(time.Millisecond), timefmt.Stamp(b.StartedAt)))
		}
	}
	return out
}
