package command

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/history"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
)

// ran is one finished leasewrap: its exit status and everything it wrote.
type ran struct {
	code           int
	stdout, stderr []byte
}

// runLeasewrap runs leasewrap to its end with stdout and stderr kept
// apart, failing the test after timeout.
func runLeasewrap(t *testing.T, timeout time.Duration, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("leasewrap %q: %v (after %s); stderr:\n%s", args, err, timeout, stderr.Bytes())
	}
	return ran{code: cmd.ProcessState.ExitCode(), stdout: stdout.Bytes(), stderr: stderr.Bytes()}
}

// keptOutput is what `history --output` prints for job, with extra to pick
// a run; it fails the test unless history exits 0.
func (d db) keptOutput(t *testing.T, job string, extra ...string) []byte {
	t.Helper()
	r := runLeasewrap(t, 20*time.Second, append([]string{"history", "--database-url", pgtest.URL(), "--table", d.table,
		"--job", job, "--output"}, extra...)...)
	if r.code != 0 {
		t.Fatalf("history --output %q exited %d: %s", extra, r.code, r.stderr)
	}
	return r.stdout
}

// lines sends each line read from r on the channel it returns, closed at
// the end of r.
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// The run keeps the last SIZE bytes of what the command wrote to stdout and
// stderr, in the order leasewrap read them, while each stream still reaches
// leasewrap's own unchanged. The command writes to each stream in turn and
// waits, on its stdin, until the test has seen the line come out of
// leasewrap: so the order leasewrap read them in is known.
func TestKeptOutputIsTheLastBytesOfBothStreamsInOrder(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const rounds = 20
	script := `i=0; while [ $i -lt ` + strconv.Itoa(rounds) + ` ]; do i=$((i+1))
  printf 'out %d\n' $i; read _ || exit 9
  printf 'err %d\n' $i >&2; read _ || exit 9
done; printf 'last words'`
	cmd := exec.Command(binary, d.args("--job", "ordered", "--keep-output", "100", "--", "sh", "-c", script)...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var stdout, logs bytes.Buffer
	outLines, errLines := lines(io.TeeReader(outPipe, &stdout)), lines(io.TeeReader(errPipe, &logs))
	await := func(ch <-chan string, want string) {
		t.Helper()
		lwtest.ExpectLine(t, ch, want, 30*time.Second)
	}
	var written strings.Builder
	for i := 1; i <= rounds; i++ {
		await(outLines, fmt.Sprintf("out %d", i))
		fmt.Fprintf(&written, "out %d\n", i)
		io.WriteString(stdin, "\n")
		await(errLines, fmt.Sprintf("err %d", i))
		fmt.Fprintf(&written, "err %d\n", i)
		io.WriteString(stdin, "\n")
	}
	written.WriteString("last words")
	for range outLines {
	}
	for range errLines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("leasewrap: %v; logs:\n%s", err, logs.Bytes())
	}

	var wantOut strings.Builder
	for i := 1; i <= rounds; i++ {
		fmt.Fprintf(&wantOut, "out %d\n", i)
	}
	wantOut.WriteString("last words")
	if stdout.String() != wantOut.String() {
		t.Errorf("leasewrap's stdout %q, want the command's own %q", stdout.String(), wantOut.String())
	}
	var childErr []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(line, "err ") {
			childErr = append(childErr, line)
		}
	}
	if len(childErr) != rounds || childErr[0] != "err 1" || childErr[rounds-1] != fmt.Sprintf("err %d", rounds) {
		t.Errorf("the command's stderr lines on leasewrap's: %q, want err 1 to err %d", childErr, rounds)
	}
	all := written.String()
	if got, want := string(d.keptOutput(t, "ordered")), all[len(all)-100:]; got != want {
		t.Errorf("kept output %q, want the last 100 bytes written, %q", got, want)
	}
}

// Kept output is raw bytes: history --output prints them as the command
// wrote them, invalid UTF-8 and NUL included, as leasewrap's own stdout
// got them. (One stream only: the order of writes close together on two
// streams is the order leasewrap happened to read them in.)
func TestHistoryOutputPrintsTheBytesAsWritten(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const written = "a\xff\x00b\n\xc3(\x00end"
	r := runLeasewrap(t, 20*time.Second, d.args("--job", "raw", "--keep-output", "1KiB", "--",
		"sh", "-c", `printf 'a\377\000b\n'; printf '\303(\000'; printf 'end'`)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if string(r.stdout) != written {
		t.Errorf("leasewrap's stdout %q, want %q", r.stdout, written)
	}
	if got := string(d.keptOutput(t, "raw")); got != written {
		t.Errorf("history --output printed %q, want %q", got, written)
	}
}

// A command that writes a lot, fast, runs to its end with leasewrap's
// stdout going to /dev/null, and the run keeps the end of it.
func TestAFloodOfOutputIsKeptByItsTail(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// 15 million numbers: about 114 MB, far more than any pipe holds.
	cmd := exec.Command(binary, d.args("--job", "flood", "--keep-output", "64KiB", "--", "seq", "1", "15000000")...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
	var logs bytes.Buffer
	cmd.Stderr = &logs // cmd.Stdout is /dev/null
	if err := cmd.Run(); err != nil {
		t.Fatalf("leasewrap: %v; logs:\n%s", err, logs.Bytes())
	}
	kept := d.keptOutput(t, "flood")
	var want bytes.Buffer
	for i := 14990000; i <= 15000000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if w := want.Bytes()[want.Len()-64<<10:]; !bytes.Equal(kept, w) {
		t.Errorf("kept %d bytes ending %q, want the last 64 KiB ending %q", len(kept), kept[max(0, len(kept)-40):], w[len(w)-40:])
	}
}

// When leasewrap's own stdout goes away (`leasewrap ... | head`), the
// command's stdout is still read to its end: the command is never blocked
// on a pipe nobody reads, and the run keeps what it wrote.
func TestKeptOutputDrainsWhenStdoutCloses(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	start := filepath.Join(t.TempDir(), "go")
	script := `while [ ! -e "$0" ]; do sleep 0.05; done; head -c 1000000 /dev/zero | tr '\0' x; echo END; exit 3`
	cmd := exec.Command(binary, d.args("--job", "closed-stdout", "--keep-output", "10", "--", "sh", "-c", script, start)...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close() // before the command writes a byte
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("leasewrap exited %d, want the command's 3; logs:\n%s", cmd.ProcessState.ExitCode(), logs.Bytes())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("leasewrap still running 60s after its stdout closed: the command is blocked writing to a pipe nobody reads")
	}
	if got := string(d.keptOutput(t, "closed-stdout")); got != "xxxxxxEND\n" {
		t.Errorf("kept %q, want the last 10 bytes written", got)
	}
	if !strings.Contains(logs.String(), "cannot copy the command's stdout to leasewrap's") {
		t.Errorf("no word on the closed stdout in the logs:\n%s", logs.Bytes())
	}
}

// With --retries each attempt keeps its own output, in its own history
// row; history --output picks one by token and attempt, and is the last
// attempt's without.
func TestEachAttemptKeepsItsOwnOutput(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	count := filepath.Join(t.TempDir(), "attempts")
	script := `n=$(cat "$0" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0"; echo "attempt $n says hi"; [ $n -ge 3 ]`
	r := runLeasewrap(t, 60*time.Second, d.args("--job", "retried", "--keep-output", "1KiB", "--retries", "2", "--retry-delay", "10ms",
		"--", "sh", "-c", script, count)...)
	if r.code != 0 {
		t.Fatalf("exit %d, want the third attempt's 0: %s", r.code, r.stderr)
	}
	var token int64
	d.query(t, &token, `SELECT fencing_token FROM TABLE WHERE job_name = 'retried'`)
	for attempt := 1; attempt <= 3; attempt++ {
		want := fmt.Sprintf("attempt %d says hi\n", attempt)
		if got := string(d.keptOutput(t, "retried", "--token", strconv.FormatInt(token, 10), "--attempt", strconv.Itoa(attempt))); got != want {
			t.Errorf("attempt %d kept %q, want %q", attempt, got, want)
		}
	}
	if got, want := string(d.keptOutput(t, "retried")), "attempt 3 says hi\n"; got != want {
		t.Errorf("the latest run's output %q, want the last attempt's %q", got, want)
	}
}

// history --output without a run that kept output says so in one line and
// exits 1; history --json tells each run's kept size.
func TestHistoryOutputWithoutKeptOutput(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.runJob(t, "quiet", 0)
	r := runLeasewrap(t, 20*time.Second, "history", "--database-url", pgtest.URL(), "--table", d.table, "--job", "quiet", "--output")
	if r.code != cmdutil.ExitNotFound || len(r.stdout) != 0 || bytes.Count(r.stderr, []byte("\n")) != 1 ||
		!bytes.Contains(r.stderr, []byte("no kept output")) || !bytes.Contains(r.stderr, []byte("--keep-output")) {
		t.Errorf("history --output exited %d, printed %q and said %q; want %d, nothing, and one line on --keep-output",
			r.code, r.stdout, r.stderr, cmdutil.ExitNotFound)
	}
	if r := runLeasewrap(t, 20*time.Second, d.args("--job", "quiet", "--keep-output", "1KiB", "--", "printf", "12345")...); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	r = runLeasewrap(t, 20*time.Second, "history", "--database-url", pgtest.URL(), "--table", d.table, "--job", "quiet", "--json")
	var runs []history.RunJSON
	if err := json.Unmarshal(r.stdout, &runs); err != nil || len(runs) != 2 {
		t.Fatalf("history --json: %v, %s", err, r.stdout)
	}
	if runs[0].OutputBytes != 5 || runs[1].OutputBytes != 0 || runs[0].ScheduledAt != nil ||
		!bytes.Contains(r.stdout, []byte(`"scheduled_at": null`)) || !bytes.Contains(r.stdout, []byte(`"output_bytes": 5`)) {
		t.Errorf("history --json: %s\nwant output_bytes 5 then 0, and scheduled_at null", r.stdout)
	}
}

// A history that cannot take the output never stops the run: the command
// runs, its output passes through and its status is leasewrap's, the lease
// is released, and leasewrap says once that runs are not recorded.
func TestKeptOutputTheHistoryRefusesNeverStopsARun(t *testing.T) {
	t.Parallel()
	for name, breakIt := range map[string]string{
		// Found when the table is read: runs are not recorded at all.
		"output column of another type": `ALTER TABLE HIST ALTER COLUMN output TYPE text`,
		// Found only when the release writes the row: the release is
		// made again without it.
		"a check on the output": `ALTER TABLE HIST ADD CONSTRAINT small_output CHECK (octet_length(output) < 4)`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			d.runJob(t, "j", 0)
			rawExec(t, d, strings.ReplaceAll(breakIt, "HIST", pgx.Identifier{d.table + "_history"}.Sanitize()))
			r := runLeasewrap(t, 30*time.Second, d.args("--job", "j", "--keep-output", "1KiB", "--",
				"sh", "-c", `echo printed; echo complained >&2; exit 3`)...)
			if r.code != 3 || string(r.stdout) != "printed\n" || !bytes.Contains(r.stderr, []byte("complained\n")) {
				t.Fatalf("exit %d, stdout %q, want the command's 3 and its output; stderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if n := bytes.Count(r.stderr, []byte(historyWarning)); n != 1 {
				t.Errorf("%d warnings that runs are not recorded, want 1:\n%s", n, r.stderr)
			}
			var exit int
			var free bool
			d.query(t, &exit, `SELECT last_exit_code FROM TABLE WHERE job_name = 'j'`)
			d.query(t, &free, `SELECT expires_at <= now() FROM TABLE WHERE job_name = 'j'`)
			if exit != 3 || !free {
				t.Errorf("lease row: last exit code %d, free %v; want 3, released", exit, free)
			}
		})
	}
}

// The output is kept in its run's row, so pruning the run removes it.
func TestPruningRemovesTheOutputWithItsRun(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	run := func(text string) {
		t.Helper()
		if r := runLeasewrap(t, 20*time.Second, d.args("--job", "pruned", "--keep-output", "1KiB", "--history-keep", "1h",
			"--", "printf", text)...); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	run("old output")
	d.exec(t, `UPDATE "`+d.table+`_history" SET started_at = started_at - interval '2 hours', finished_at = finished_at - interval '2 hours'`)
	run("new output")
	var runs, kept int
	var output string
	d.query(t, &runs, `SELECT count(*) FROM TABLE_history`)
	d.query(t, &kept, `SELECT count(*) FROM TABLE_history WHERE output IS NOT NULL`)
	d.query(t, &output, `SELECT convert_from(output, 'UTF8') FROM TABLE_history`)
	if runs != 1 || kept != 1 || output != "new output" {
		t.Errorf("after pruning: %d runs, %d outputs, %q; want the new run and its output only", runs, kept, output)
	}
}

// A bad --keep-output is refused before anything runs, naming the flag or
// variable, the value and what is valid; history's --output flags too.
func TestBadKeepOutputExits64(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{args: []string{"--keep-output", "64KB"}, want: `invalid --keep-output "64KB": want a size in bytes, KiB or MiB`},
		{args: []string{"--keep-output", "-1"}, want: `invalid --keep-output "-1"`},
		{args: []string{"--keep-output", "1.5KiB"}, want: `invalid --keep-output "1.5KiB"`},
		{args: []string{"--keep-output", "2MiB"}, want: "at most 1MiB"},
		{args: []string{"--keep-output", "1048577"}, want: "at most 1MiB"},
		{args: []string{"--keep-output", "99999999999999999999999"}, want: "at most 1MiB"},
		{env: []string{"LEASEWRAP_KEEP_OUTPUT=lots"}, want: `invalid LEASEWRAP_KEEP_OUTPUT (--keep-output) "lots"`},
	} {
		args := append(d.args("--job", "bad"), tc.args...)
		p := lw(t, tc.env, append(args, "--", "touch", marker)...)
		got := p.Wait(t, 10*time.Second)
		logs := p.Logs.String()
		if got != cmdutil.ExitUsage || strings.Count(logs, "\n") != 1 || !strings.Contains(logs, tc.want) {
			t.Errorf("%v %v: exit %d, %q; want %d and one line with %q", tc.env, tc.args, got, logs, cmdutil.ExitUsage, tc.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran despite a bad --keep-output")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--output"}, "--output needs --job"},
		{[]string{"--job", "j", "--token", "5"}, "add --output"},
		{[]string{"--job", "j", "--output", "--json"}, "does not go with --json"},
		{[]string{"--job", "j", "--output", "--token", "x"}, `invalid --token "x"`},
		{[]string{"--job", "j", "--output", "--attempt", "0"}, `invalid --attempt "0"`},
	} {
		p := lw(t, nil, append([]string{"history", "--database-url", pgtest.URL(), "--table", d.table}, tc.args...)...)
		got := p.Wait(t, 10*time.Second)
		if logs := p.Logs.String(); got != cmdutil.ExitUsage || strings.Count(logs, "\n") != 1 || !strings.Contains(logs, tc.want) {
			t.Errorf("history %v: exit %d, %q; want %d and one line with %q", tc.args, got, logs, cmdutil.ExitUsage, tc.want)
		}
	}
}

// A process the command left running in the background, holding its
// stdout, does not keep the run from ending: leasewrap stops what the run
// left behind, and the run keeps what was printed.
func TestABackgroundProcessHoldingTheOutputDoesNotHoldTheRun(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r := runLeasewrap(t, 60*time.Second, d.args("--job", "daemon", "--keep-output", "1KiB", "--",
		"sh", "-c", `sleep 600 & echo started`)...)
	if r.code != 0 || string(r.stdout) != "started\n" {
		t.Fatalf("exit %d, stdout %q; want 0 and the command's line; logs:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := string(d.keptOutput(t, "daemon")); got != "started\n" {
		t.Errorf("kept %q, want %q", got, "started\n")
	}
}

// With --keep-output, --ping-output sends the end of the same tail: stdout
// and stderr.
func TestPingOutputSendsTheKeptTail(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	m := lwtest.NewMonitor(t, nil)
	r := runLeasewrap(t, 30*time.Second, d.args("--job", "pinged", "--keep-output", "1KiB", "--ping-url", m.URL+"/check",
		"--ping-output", "--", "sh", "-c", `echo to-stdout; echo to-stderr >&2; exit 4`)...)
	if r.code != 4 {
		t.Fatalf("exit %d, want 4: %s", r.code, r.stderr)
	}
	var got []string
	pgtest.Eventually(t, 5*time.Second, "the final ping", func() bool { got = m.Lines(); return len(got) >= 2 })
	final := got[len(got)-1]
	if !strings.HasPrefix(final, "POST /check/4 ") || !strings.Contains(final, "to-stdout") || !strings.Contains(final, "to-stderr") {
		t.Errorf("final ping %q, want status 4 and both streams", final)
	}
}

// The command's stdout is leasewrap's own file, passed through, unless
// --keep-output asks for its output: then it is a pipe. A run that printed
// nothing keeps an empty output, which history --output prints as such.
func TestStdoutIsAPipeOnlyWithKeepOutput(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	answer := filepath.Join(t.TempDir(), "answer")
	script := `if [ -p /dev/stdout ]; then echo pipe > "$0"; else echo file > "$0"; fi`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "file\n"},
		{[]string{"--keep-output", "1KiB"}, "pipe\n"},
	} {
		stdout, err := os.CreateTemp(t.TempDir(), "stdout")
		if err != nil {
			t.Fatal(err)
		}
		args := append(d.args("--job", "fd"), tc.args...)
		cmd := exec.Command(binary, append(args, "--", "sh", "-c", script, answer)...)
		cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = stdout, &logs
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v; logs:\n%s", tc.args, err, logs.Bytes())
		}
		if got, err := os.ReadFile(answer); err != nil || string(got) != tc.want {
			t.Errorf("%v: the command found its stdout a %q (%v), want %q", tc.args, got, err, tc.want)
		}
	}
	if got := d.keptOutput(t, "fd"); len(got) != 0 {
		t.Errorf("history --output of a run that printed nothing: %q", got)
	}
}

// When leasewrap's stdout and stderr are one file (`>>log 2>&1`), the
// command gets one pipe for both: its lines reach that file, and the kept
// output, in exactly the order it wrote them, however close together.
func TestOneFileForBothStreamsKeepsTheExactOrder(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	log := filepath.Join(t.TempDir(), "job.log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	script := `i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo "out $i"; echo "err $i" >&2; done`
	cmd := exec.Command(binary, d.args("--job", "merged", "--keep-output", "1MiB", "--", "sh", "-c", script)...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		t.Fatalf("leasewrap: %v", err)
	}
	var want strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&want, "out %d\nerr %d\n", i, i)
	}
	if got := string(d.keptOutput(t, "merged")); got != want.String() {
		t.Errorf("kept output is not the command's lines in the order written:\n%s", got)
	}
	written, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(written), "\n") {
		if !strings.HasPrefix(line, "{") && line != "" { // leasewrap's own JSON log lines
			lines = append(lines, line)
		}
	}
	if got := strings.Join(lines, "\n") + "\n"; got != want.String() {
		t.Errorf("the log file has the command's lines out of order:\n%s", got)
	}
}

// history --output to a terminal escapes what the terminal would act on
// (a run's output may retitle the window or clear the screen), as every
// other output of leasewrap does; --raw, or a pipe, gives the bytes.
func TestHistoryOutputEscapesOnATerminal(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r := runLeasewrap(t, 20*time.Second, d.args("--job", "esc", "--keep-output", "1KiB", "--",
		"sh", "-c", `printf '\033]0;pwned\007hello \033[31mred\n'`)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	const written = "\x1b]0;pwned\x07hello \x1b[31mred\n"
	if got := string(d.keptOutput(t, "esc")); got != written {
		t.Errorf("history --output to a pipe printed %q, want the bytes %q", got, written)
	}
	history := []string{"history", "--database-url", pgtest.URL(), "--table", d.table, "--job", "esc", "--output"}
	none := func(io.Writer, *bufio.Scanner) {}
	seen := strings.Join(underTerminal(t, nil, history, none), "\n")
	if strings.Contains(seen, "\x1b") || strings.Contains(seen, "\x07") || !strings.Contains(seen, `\x1b]0;pwned\ahello \x1b[31mred`) {
		t.Errorf("history --output on a terminal showed %q, want the controls escaped", seen)
	}
	seen = strings.Join(underTerminal(t, nil, append(history, "--raw"), none), "\n")
	if !strings.Contains(seen, "\x1b]0;pwned\x07hello \x1b[31mred") {
		t.Errorf("history --output --raw on a terminal showed %q, want the bytes as written", seen)
	}
}
