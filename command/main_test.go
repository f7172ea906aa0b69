package command

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/tcpproxy"
)

func TestExitStatusOfTheChild(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit:0", 0}, {"exit:1", 1}, {"exit:2", 2}, {"exit:42", 42}, {"exit:255", 255},
		{"kill:TERM", 143}, {"kill:INT", 130}, {"kill:HUP", 129}, {"kill:QUIT", 131}, {"kill:USR1", 138}, {"kill:KILL", 137},
	} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			job := "exit-" + tc.script
			p := lw(t, []string{child(tc.script)}, d.args("--job", job, "--", self())...)
			if got := p.Wait(t, 20*time.Second); got != tc.want {
				t.Errorf("exit status %d, want %d", got, tc.want)
			}
			if e := p.WaitLog(t, "child exited"); e["status"] != float64(tc.want) {
				t.Errorf("logged status %v, want %d", e["status"], tc.want)
			}
			if in := d.expiresIn(t, job); in > 0 {
				t.Errorf("lease still live for %s after the child exited, want released", in)
			}
		})
	}
}

func TestCommandNotFoundOrNotExecutable(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]int{"leasewrap-no-such-command": 127, plain: 126} {
		p := lw(t, nil, d.args("--job", "x", "--", cmd)...)
		if got := p.Wait(t, 10*time.Second); got != want {
			t.Errorf("%s: exit %d, want %d", cmd, got, want)
		}
		if !strings.Contains(p.Logs.String(), "cannot run") {
			t.Errorf("%s: no reason given: %q", cmd, p.Logs)
		}
	}
	if h := d.holder(t, "x"); h != "" {
		t.Errorf("a lease was taken for a command that cannot run (holder %q)", h)
	}
}

func TestOnlyOneOfSeveralWrappersRuns(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			procs := make([]*lwtest.Proc, n)
			for i := range procs {
				procs[i] = lw(t, []string{child("trap ready block")},
					d.args("--job", "report", "--id", fmt.Sprint("w", i), "--skip-exit-code", "3", "--", self())...)
			}
			// Every wrapper but the leader exits with the skip status, and
			// names the leader; the leader's child runs until told to stop.
			leader := -1
			deadline := time.After(20 * time.Second)
			for skipped := 0; skipped < n-1; {
				for i, p := range procs {
					select {
					case <-p.Exited:
					default:
						continue
					}
					if p.Code() != 3 {
						t.Fatalf("wrapper %d exited %d, want the skip status 3", i, p.Code())
					}
				}
				skipped = 0
				for _, p := range procs {
					select {
					case <-p.Exited:
						skipped++
					default:
					}
				}
				select {
				case <-deadline:
					t.Fatalf("%d of %d wrappers skipped in time", skipped, n-1)
				case <-time.After(10 * time.Millisecond):
				}
			}
			for i, p := range procs {
				select {
				case <-p.Exited:
					e := p.WaitLog(t, "skipped: lease held by another instance")
					if e["current_holder"] != d.holder(t, "report") {
						t.Errorf("wrapper %d logged holder %v, the table says %q", i, e["current_holder"], d.holder(t, "report"))
					}
				default:
					if leader >= 0 {
						t.Fatalf("wrappers %d and %d both run", leader, i)
					}
					leader = i
				}
			}
			if leader < 0 {
				t.Fatal("no wrapper ran the command")
			}
			procs[leader].Expect(t, "ready")
			procs[leader].Cmd.Process.Signal(syscall.SIGTERM)
			procs[leader].Expect(t, "signal SIGTERM")
			if got := procs[leader].Wait(t, 10*time.Second); got != 143 {
				t.Errorf("leader exited %d after SIGTERM, want the child's 143", got)
			}
		})
	}
}

func TestStolenLeaseStopsTheChildAndExits75(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--", self())...)
	p.Expect(t, "ready")
	window := p.Window()
	stolen := window.Start()
	d.exec(t, `UPDATE TABLE SET holder = 'thief', fencing_token = fencing_token + 1`)
	p.Expect(t, "signal SIGTERM")
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("exit %d, want 75", got)
	}
	// One renewal interval (300ms) plus a second for the renewal's round
	// trip, and what this machine kept the test and leasewrap waiting, to
	// when leasewrap logged the SIGTERM: how fast the child then prints it
	// does not enter it.
	took := logTime(t, p.WaitLog(t, "stopping child: lease can no longer be guaranteed")).Sub(stolen)
	if late, stalled := window.Late(took, 300*time.Millisecond+time.Second); late {
		t.Errorf("SIGTERM %s after the lease was taken, want within one renewal (+%s stalled)", took, stalled)
	}
	p.WaitLog(t, "lease lost")
	if h := d.holder(t, "j"); h != "thief" {
		t.Errorf("holder %q after exit, want the thief's row untouched", h)
	}
}

// A renewal that finds the row gone (or older than this holder wrote it)
// says so distinctly: a failover or an operator lost a committed write.
// The run is still recorded, once, as lost, from its start: no taker will
// close it, since none finds the row it would close it from.
func TestLostRowIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--id", "leader", "--", self())...)
	p.Expect(t, "ready")
	deleted := time.Now()
	d.exec(t, `DELETE FROM TABLE`)
	e := p.WaitLog(t, "lease lost")
	if msg, _ := e["error"].(string); e["level"] != "error" || !strings.Contains(msg, "lost a committed write") {
		t.Errorf("lease lost logged %v, want an error naming the lost write", e)
	}
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("exit %d, want 75", got)
	}
	runs := d.historyRuns(t, "leader")
	if len(runs) != 1 || !strings.HasPrefix(runs[0], "1:") || !strings.HasSuffix(runs[0], ":lost") {
		t.Errorf("history of the run whose row was deleted: %q, want one lost run", runs)
	}
	var started time.Time
	if err := d.pool.QueryRow(context.Background(), `SELECT started_at FROM `+pgx.Identifier{d.table + "_history"}.Sanitize()).
		Scan(&started); err == nil && !started.Before(deleted) {
		t.Errorf("the lost run started at %v, after its row was deleted (%v): want its start", started, deleted)
	}
}

// A row deleted between two renewals, the command ending before the next
// one, is noticed by no renewal: the release says so, as a warning, and
// the child's status is still passed through and its run recorded once.
func TestRowDeletedBeforeTheReleaseIsReportedThen(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	goOn := filepath.Join(t.TempDir(), "go")
	p := lw(t, []string{child("ready await:" + goOn + " exit:3")},
		d.argsTTL("60s", "--renew-interval", "30s", "--job", "j", "--id", "leader", "--", self())...)
	p.Expect(t, "ready")
	d.exec(t, `DELETE FROM TABLE`)
	if err := os.WriteFile(goOn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := p.WaitLog(t, "the lease was no longer this instance's at the release: its row was deleted or changed since the last renewal; the run is recorded in the history")
	if e["level"] != "warn" {
		t.Errorf("the release that found no row logged %v, want a warning", e)
	}
	if got := p.Wait(t, 10*time.Second); got != 3 {
		t.Errorf("exit %d, want the child's 3", got)
	}
	if runs := d.historyRuns(t, "leader"); !slices.Equal(runs, []string{"1:3:exited"}) {
		t.Errorf("history of the run whose row was deleted: %q, want one run that exited 3", runs)
	}
}

// The database goes away mid-run, by a cut or a blackhole: the child must
// be dead before the lease the database still records runs out.
func TestDatabaseLostMidRunStopsTheChildBeforeExpiry(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			proxy, url := pgtest.Proxied(t, d.pool)
			// The later --database-url wins over the one args sets.
			args := d.args("--database-url", url, "--job", "j", "--", self())
			p := lw(t, []string{child("trap ready block")}, args...)
			p.Expect(t, "ready")
			pid := int(p.WaitLog(t, "child started")["pid"].(float64))
			if fault == "cut" {
				proxy.Cut()
			} else {
				proxy.Blackhole()
			}
			waitGone(t, pid, 10*time.Second)
			if left := d.expiresIn(t, "j"); left <= 0 {
				t.Errorf("child outlived the lease: the database saw it expired %s before", -left)
			}
			if got := p.Wait(t, 10*time.Second); got != 75 {
				t.Errorf("exit %d, want 75", got)
			}
		})
	}
}

func TestChildIgnoringSIGTERMIsKilledWithItsGrandchildren(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The shell and its background sleep both ignore SIGTERM.
	script := `trap "" TERM; sleep 300 & echo $! > ` + pidFile + `; echo ready; wait`
	p := lw(t, nil, d.args("--job", "j", "--", "sh", "-c", script)...)
	p.Expect(t, "ready")
	grandchild := readPid(t, pidFile)
	stolen := time.Now()
	d.exec(t, `UPDATE TABLE SET holder = 'thief', fencing_token = fencing_token + 1`)
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("exit %d, want 75", got)
	}
	if took := time.Since(stolen); took < 500*time.Millisecond {
		t.Errorf("killed %s after the loss, before the 500ms grace", took)
	}
	waitGone(t, grandchild, time.Second)
}

func TestStandbyTakesOverWithoutOverlap(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"child exits", "leader SIGKILLed"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			history := filepath.Join(t.TempDir(), "history")
			// The leader's child exits once the standby stands by, which
			// on a busy machine can take longer than any fixed sleep.
			done := filepath.Join(t.TempDir(), "done")
			script := "record:" + history + " ready await:" + done
			if how == "leader SIGKILLed" {
				script = "record:" + history + " ready block"
			}
			leader := lw(t, []string{child(script)}, d.args("--job", "j", "--id", "leader", "--", self())...)
			leader.Expect(t, "ready")
			standby := lw(t, []string{child("record:" + history + " ready exit:0")},
				d.args("--job", "j", "--id", "standby", "--wait", "--", self())...)
			standby.WaitLog(t, "standing by: lease held by another instance")
			window := standby.Window()
			if err := os.WriteFile(done, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if how == "leader SIGKILLed" {
				leader.Cmd.Process.Kill()
				runs := readHistory(t, history)
				waitGone(t, runs[0].Pid, time.Second) // the child dies with its wrapper
			}
			standby.Expect(t, "ready")
			if got := standby.Wait(t, 10*time.Second); got != 0 {
				t.Errorf("standby exited %d", got)
			}
			if how == "leader SIGKILLed" {
				// The takeover is timed from the dead leader's expiry to the
				// standby's take, both on the database clock (the take closes
				// the dead run at the expiry it found): how fast the
				// standby's child then starts does not enter it.
				expired, taken := d.takeover(t, "j", "leader")
				if taken.Before(expired) {
					t.Errorf("standby took the lease at %s, before the dead leader's expired at %s", taken, expired)
				}
				// One retry interval (100ms), a second for the take's round
				// trip, and what this machine kept the test and the standby
				// waiting.
				stalled := window.StalledIn(taken.Sub(window.Start()))
				if late := taken.Sub(expired); late > 100*time.Millisecond+time.Second+stalled {
					t.Errorf("standby took over %s after the dead leader's lease expired (+%s stalled)", late, stalled)
				}
			}
			runs := readHistory(t, history)
			if len(runs) != 2 {
				t.Fatalf("history has %d runs, want 2: %+v", len(runs), runs)
			}
			first, second := runs[0], runs[1]
			if first.Holder != "leader" || second.Holder != "standby" || second.Token <= first.Token {
				t.Errorf("runs %+v, want the leader's then the standby's with a higher token", runs)
			}
			if first.End != 0 && first.End > second.Start {
				t.Errorf("runs overlap by %s", time.Duration(first.End-second.Start))
			}
		})
	}
}

func TestSignalWhileStandingByEndsWithoutTheLease(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	leader := lw(t, []string{child("ready block")}, d.args("--job", "j", "--id", "leader", "--", self())...)
	leader.Expect(t, "ready")
	standby := lw(t, []string{child("ready")}, d.args("--job", "j", "--wait", "--", self())...)
	standby.WaitLog(t, "standing by: lease held by another instance")
	standby.Cmd.Process.Signal(syscall.SIGTERM)
	if got := standby.Wait(t, 5*time.Second); got != 143 {
		t.Errorf("standby exited %d on SIGTERM, want 143", got)
	}
	if h := d.holder(t, "j"); h != "leader" {
		t.Errorf("holder %q, want the leader", h)
	}
}

func TestWaitTimeoutExits124(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	leader := lw(t, []string{child("ready block")}, d.args("--job", "j", "--", self())...)
	leader.Expect(t, "ready")
	standby := lw(t, []string{child("ready")}, d.args("--job", "j", "--wait", "--wait-timeout", "500ms", "--", self())...)
	if got := standby.Wait(t, 10*time.Second); got != 124 {
		t.Errorf("exit %d, want 124", got)
	}
}

func TestChildEnvironment(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := lw(t, []string{child("env")}, d.args("--job", "env-job", "--id", "me", "--", self())...)
	for _, want := range []string{"LEASEWRAP_HOLDER=me", "LEASEWRAP_JOB=env-job", "LEASEWRAP_TABLE=" + d.table} {
		p.Expect(t, want)
	}
	if got := p.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("exit %d", got)
	}
}

func TestEverythingAfterDashDashIsTheChild(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	bin := t.TempDir()
	for _, name := range []string{"status", "version", "migrate"} {
		script := "#!/bin/sh\necho i am " + name + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		p := lw(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, d.args("--job", name, "--", name, "--job", "x")...)
		p.Expect(t, "i am "+name+" --job x")
		if got := p.Wait(t, 10*time.Second); got != 0 {
			t.Errorf("%s: exit %d", name, got)
		}
	}
}

func TestUnreachableDatabaseExits69WithoutThePassword(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := d.pool.Config().ConnConfig
	blackhole := tcpproxy.Start(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	blackhole.Blackhole()
	for name, url := range map[string]string{
		"refused":   "postgres://user:s3cr3t-pw@127.0.0.1:1/db?sslmode=disable",
		"blackhole": "postgres://user:s3cr3t-pw@" + blackhole.Addr() + "/db?sslmode=disable&connect_timeout=1",
	} {
		t.Run(name, func(t *testing.T) {
			p := lw(t, nil, "--database-url", url, "--job", "j", "--log-format", "json", "--", "true")
			window := p.Window()
			if got := p.Wait(t, 15*time.Second); got != 69 {
				t.Errorf("exit %d, want 69", got)
			}
			took := time.Since(window.Start())
			if late, stalled := window.Late(took, 10*time.Second); late {
				t.Errorf("took %s to give up (+%s stalled)", took, stalled)
			}
			logs := p.Logs.String()
			if strings.Contains(logs, "s3cr3t-pw") {
				t.Errorf("password in output: %s", logs)
			}
			host := strings.Split(strings.Split(url, "@")[1], "/")[0]
			if e := p.WaitLog(t, "lease store unavailable"); e["database"] != host {
				t.Errorf("logged database %v, want %s", e["database"], host)
			}
		})
	}
}

// Every log line passes the redactor: here the server itself echoes the
// password, which the connection string also uses as the database name.
func TestPasswordIsRedactedEvenWhenTheServerEchoesIt(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := d.pool.Config().ConnConfig
	const secret = "lw-secret-7f3a"
	url := fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, secret, cfg.Host, cfg.Port, secret)
	p := lw(t, nil, "--database-url", url, "--job", "j", "--log-format", "json", "--", "true")
	if got := p.Wait(t, 15*time.Second); got != 69 {
		t.Errorf("exit %d, want 69", got)
	}
	e := p.WaitLog(t, "lease store unavailable")
	if msg, _ := e["error"].(string); !strings.Contains(msg, "xxxxx") {
		t.Errorf("error %q: want the server's message with the password masked", msg)
	}
	if strings.Contains(p.Logs.String(), secret) {
		t.Errorf("password in the output: %s", p.Logs)
	}
}

func TestBadInputExits64WithOneLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		names string // what the message must mention
	}{
		{"no job", nil, []string{"--", "true"}, "--job"},
		{"long job", nil, []string{"--job", strings.Repeat("j", 201), "--", "true"}, "--job"},
		{"dot job", nil, []string{"--job", ".", "--", "true"}, `".": ".", ".." and names of only spaces are refused`},
		{"dot-dot job", nil, []string{"--job", "..", "--", "true"}, `"..": ".", ".." and names of only spaces are refused`},
		{"blank job", nil, []string{"--job", " \t ", "--", "true"}, "only spaces"},
		{"dot-dot job from the environment", []string{"LEASEWRAP_JOB=.."}, []string{"status"}, "LEASEWRAP_JOB"},
		{"bad table", nil, []string{"--job", "j", "--table", "a.b.c", "--", "true"}, "--table"},
		{"ttl too short", nil, []string{"--job", "j", "--ttl", "20s", "--renew-interval", "15s", "--", "true"}, "--ttl"},
		{"zero grace", nil, []string{"--job", "j", "--grace", "0s", "--", "true"}, "--grace"},
		{"bad duration", nil, []string{"--job", "j", "--ttl", "soon", "--", "true"}, "ttl"},
		{"bad env duration", []string{"LEASEWRAP_RENEW_INTERVAL=often"}, []string{"--job", "j", "--", "true"}, "renew-interval"},
		{"negative hold-for", nil, []string{"--job", "j", "--hold-for", "-1s", "--", "true"}, "--hold-for"},
		{"skip code", nil, []string{"--job", "j", "--skip-exit-code", "300", "--", "true"}, "--skip-exit-code"},
		{"log level", nil, []string{"--job", "j", "--log-level", "loud", "--", "true"}, "--log-level"},
		{"log format", nil, []string{"--job", "j", "--log-format", "xml", "--", "true"}, "--log-format"},
		{"no command", nil, []string{"--job", "j", "--"}, "command"},
		{"wait-timeout alone", nil, []string{"--job", "j", "--wait-timeout", "1m", "--", "true"}, "--wait"},
		{"unknown flag", nil, []string{"--jobs", "j", "--", "true"}, "jobs"},
		{"bad url", nil, []string{"--job", "j", "--database-url", "postgres://u:s3cr3t@[::1/x", "--", "true"}, "--database-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := lw(t, tc.env, tc.args...)
			if got := p.Wait(t, 10*time.Second); got != 64 {
				t.Errorf("exit %d, want 64", got)
			}
			out := p.Logs.String()
			if lines := strings.Count(out, "\n"); lines != 1 || !strings.HasPrefix(out, "leasewrap: ") {
				t.Errorf("want one line starting with \"leasewrap: \", got %q", out)
			}
			if !strings.Contains(out, tc.names) || strings.Contains(out, "s3cr3t") {
				t.Errorf("message %q should name %q (and never a password)", out, tc.names)
			}
		})
	}
}

func TestMigrateAndVersion(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for i, want := range []string{`created table "` + d.table + `"`, `lease table ` + d.table + ` is up to date`} {
		p := lw(t, nil, "migrate", "--database-url", pgtest.URL(), "--table", d.table)
		p.Expect(t, want)
		if got := p.Wait(t, 10*time.Second); got != 0 {
			t.Errorf("migrate run %d exited %d", i+1, got)
		}
	}
	p := lw(t, nil, "version")
	line := <-p.Lines
	if !strings.HasPrefix(line, "leasewrap ") {
		t.Errorf("version printed %q", line)
	}
}

func TestReadOnlyDatabaseExits69(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for name, url := range map[string]string{
		"read-only session": pgtest.URL() + "&options=-c%20default_transaction_read_only%3Don",
		"no primary":        pgtest.URL() + "&options=-c%20default_transaction_read_only%3Don&target_session_attrs=read-write",
	} {
		t.Run(name, func(t *testing.T) {
			p := lw(t, nil, d.args("--database-url", url, "--job", "j", "--", "true")...)
			if got := p.Wait(t, 15*time.Second); got != 69 {
				t.Errorf("exit %d, want 69", got)
			}
			e := p.WaitLog(t, "lease store unavailable")
			if msg, _ := e["error"].(string); !strings.Contains(msg, "read-only") && !strings.Contains(msg, "read-write") {
				t.Errorf("error %q does not say the server is read-only", msg)
			}
		})
	}
}

// Several hosts in one connection string: leasewrap uses the first that
// answers as a writable primary.
func TestMultiHostConnectionString(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := d.pool.Config().ConnConfig
	dsn := fmt.Sprintf("host=127.0.0.1,%s port=1,%d user=%s dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2",
		cfg.Host, cfg.Port, cfg.User, cfg.Database)
	p := lw(t, []string{child("exit:0")}, d.args("--database-url", dsn, "--job", "j", "--", self())...)
	if got := p.Wait(t, 15*time.Second); got != 0 {
		t.Errorf("exit %d, want 0", got)
	}
}

// A command that hangs past --max-runtime is stopped (SIGKILL after the
// grace when it ignores SIGTERM), the lease released, and leasewrap exits 124.
// The child must have its trap in place before the stop for the SIGKILL to
// be tested; when a busy machine starts it too slowly for that (no "ready"),
// the run is tried again with twice the --max-runtime.
func TestMaxRuntimeStopsAHungCommand(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for maxRuntime := 700 * time.Millisecond; maxRuntime <= 6*time.Second; maxRuntime *= 2 {
		p := lw(t, []string{child("ignore-term ready block")}, d.args("--job", "hung", "--max-runtime", maxRuntime.String(), "--", self())...)
		if got := p.Wait(t, 30*time.Second); got != 124 {
			t.Errorf("exit %d, want 124", got)
		}
		var lines []string
		for line := range p.Lines {
			lines = append(lines, line)
		}
		if !slices.Contains(lines, "ready") {
			t.Logf("the command was stopped before it was ready (--max-runtime %s): trying again", maxRuntime)
			continue
		}
		want := fmt.Sprintf("stopping the command: it ran longer than --max-runtime %s (grace 500ms)", maxRuntime)
		if e := p.WaitLog(t, want); e["level"] != "warn" {
			t.Errorf("logged %v", e)
		}
		if !strings.Contains(p.Logs.String(), "child did not stop in time; sending SIGKILL") {
			t.Errorf("no SIGKILL for a command that ignores SIGTERM:\n%s", p.Logs)
		}
		if in := d.expiresIn(t, "hung"); in > 0 {
			t.Errorf("lease still held for %s after the timed-out command", in)
		}
		// The lease row (status) and the history (history, the web page)
		// record the 124 leasewrap exited with, not the child's 137.
		var row, history *int
		var outcome string
		if err := d.pool.QueryRow(t.Context(), `SELECT l.last_exit_code, h.exit_code, h.outcome FROM "`+d.table+`" l, "`+
			d.table+`_history" h WHERE l.job_name = 'hung' AND h.job_name = 'hung'`).Scan(&row, &history, &outcome); err != nil {
			t.Fatal(err)
		}
		if row == nil || *row != 124 || history == nil || *history != 124 || outcome != "timed_out" {
			t.Errorf("recorded exit %v in the lease row, %v (%s) in the history; want 124 (timed_out) in both", row, history, outcome)
		}
		return
	}
	t.Fatal("the command was never ready before --max-runtime, even at 5.6s")
}

// A flaky command that fails twice runs a third time, under the same lease
// and token, and leasewrap exits with the last attempt's status.
func TestRetriesKeepTheLease(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	dir := t.TempDir()
	flaky := `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n >count; echo $LEASEWRAP_FENCING_TOKEN >>tokens; [ $n -ge 3 ]`
	for _, tc := range []struct {
		retries string
		want    int
		runs    string
	}{{"2", 0, "3"}, {"1", 1, "2"}} {
		os.Remove(filepath.Join(dir, "count"))
		os.Remove(filepath.Join(dir, "tokens"))
		p := lw(t, nil, d.args("--job", "flaky", "--retries", tc.retries, "--retry-delay", "50ms", "--", "sh", "-c", "cd "+dir+" && "+flaky)...)
		if got := p.Wait(t, 15*time.Second); got != tc.want {
			t.Errorf("--retries %s: exit %d, want %d", tc.retries, got, tc.want)
		}
		count, _ := os.ReadFile(filepath.Join(dir, "count"))
		tokens, _ := os.ReadFile(filepath.Join(dir, "tokens"))
		if strings.TrimSpace(string(count)) != tc.runs {
			t.Errorf("--retries %s: ran %s times, want %s", tc.retries, strings.TrimSpace(string(count)), tc.runs)
		}
		if lines := strings.Fields(string(tokens)); len(lines) == 0 || slices.Contains(lines, "") || len(slices.Compact(lines)) != 1 {
			t.Errorf("--retries %s: tokens %q, want one token for every attempt", tc.retries, lines)
		}
	}
	// Every attempt is a run in the history, newest first: the last
	// invocation's two, then the first's three.
	h := lw(t, nil, "history", "--json", "--job", "flaky", "--database-url", pgtest.URL(), "--table", d.table)
	var out strings.Builder
	for line := range h.Lines {
		out.WriteString(line)
	}
	var runs []struct {
		Attempt  int  `json:"attempt"`
		ExitCode *int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out.String()), &runs); err != nil {
		t.Fatalf("history --json: %v in %q", err, out.String())
	}
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%d:%d", r.Attempt, *r.ExitCode))
	}
	if want := []string{"2:1", "1:1", "3:0", "2:1", "1:1"}; !slices.Equal(got, want) {
		t.Errorf("history attempts:status %q, want %q", got, want)
	}
}
