// Package testchild turns a test binary into a scripted child process, so
// tests can run real processes with exact exit codes and signal behaviour.
// A test package's TestMain calls Main first; when the Env variable is set
// the binary runs the script in it instead of the tests.
//
// A script is a list of steps separated by spaces:
//
//	ready            print "ready"
//	trap             print "signal SIGX" for each forwarded signal; exit
//	                 128+N after SIGTERM, SIGINT, SIGHUP or SIGQUIT
//	ignore-term      like trap, but keep going after every signal (only SIGKILL ends it)
//	env              print the LEASEWRAP_* variables as NAME=value lines
//	grandchild:FILE  start a grandchild that ignores SIGTERM and sleeps; write its pid to FILE
//	record:FILE      append "start <monotonic-ns> <token> <holder> <pid>" (and the
//	                 run's LEASEWRAP_SCHEDULED_AT, when it has one) to FILE now and
//	                 "end <monotonic-ns> <pid>" when the script ends by exit or trapped signal
//	sleep:DURATION   sleep
//	await:FILE       wait until FILE exists: the test says when to go on
//	block            sleep until a signal ends the process
//	exit:N           exit with status N
//	kill:SIG         die by signal SIG (TERM, INT, HUP, QUIT, USR1, KILL, ...)
package testchild

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/signals"
)

// Env holds the script; when it is set, Main runs the script and exits.
const Env = "LEASEWRAP_TESTCHILD"

// NoRaceExitDelay is an environment entry that stops a binary built with
// -race from sleeping a second before it exits with status 0.
const NoRaceExitDelay = "GORACE=atexit_sleep_ms=0"

// Main runs the scripted child if Env is set, and never returns then.
func Main() {
	script, ok := os.LookupEnv(Env)
	if !ok {
		return
	}
	os.Exit(run(strings.Fields(script)))
}

var (
	outMu     sync.Mutex
	recordMu  sync.Mutex
	recordTo  string
	recordEnd bool
)

func say(format string, a ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", a...)
}

// finish writes the record's end line once and exits.
func finish(code int) {
	recordMu.Lock()
	if recordTo != "" && !recordEnd {
		appendLine(recordTo, fmt.Sprintf("end %d %d", Monotonic(), os.Getpid()))
		recordEnd = true
	}
	recordMu.Unlock()
	os.Exit(code)
}

// recordStart makes path the file of this run's record and writes its
// start line: when, the fencing token, the holder, the pid and, for a
// scheduled run, the time it runs for.
func recordStart(path string) {
	recordMu.Lock()
	recordTo = path
	recordMu.Unlock()
	line := fmt.Sprintf("start %d %s %s %d", Monotonic(), os.Getenv("LEASEWRAP_FENCING_TOKEN"), os.Getenv("LEASEWRAP_HOLDER"), os.Getpid())
	if at := os.Getenv("LEASEWRAP_SCHEDULED_AT"); at != "" {
		line += " " + at
	}
	appendLine(path, line)
}

func run(steps []string) int {
	for _, step := range steps {
		name, arg, _ := strings.Cut(step, ":")
		switch name {
		case "ready":
			say("ready")
		case "trap":
			trap(false)
		case "ignore-term":
			trap(true)
		case "env":
			printEnv()
		case "grandchild":
			if err := grandchild(arg); err != nil {
				say("grandchild: %v", err)
				return 3
			}
		case "record":
			recordStart(arg)
		case "sleep":
			d, err := time.ParseDuration(arg)
			if err != nil {
				say("sleep: %v", err)
				return 3
			}
			time.Sleep(d)
		case "await":
			for _, err := os.Stat(arg); err != nil; _, err = os.Stat(arg) {
				time.Sleep(5 * time.Millisecond)
			}
		case "block":
			select {}
		case "exit":
			n, err := strconv.Atoi(arg)
			if err != nil {
				say("exit: %v", err)
				return 3
			}
			finish(n)
		case "kill":
			sig := unix.SignalNum("SIG" + arg)
			if sig == 0 {
				say("kill: unknown signal %q", arg)
				return 3
			}
			// The Go runtime turns some signals into exit codes or ignores
			// them; a shell takes the default action for every one, once
			// env has reset the ones this process inherited as ignored
			// (under nohup, SIGHUP), which a shell may not trap.
			err := unix.Exec("/usr/bin/env", []string{"env", "--default-signal", "sh", "-c", "kill -s " + arg + " $$"}, os.Environ())
			say("kill: %v", err)
			return 3
		default:
			say("unknown step %q", step)
			return 3
		}
	}
	finish(0)
	return 0
}

// printEnv prints the LEASEWRAP_ variables, sorted.
func printEnv() {
	var lines []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LEASEWRAP_") && !strings.HasPrefix(kv, Env+"=") {
			lines = append(lines, kv)
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		say("%s", l)
	}
}

// grandchild starts a child of its own that ignores SIGTERM and blocks, and
// writes its pid to path.
func grandchild(path string) error {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), Env+"=ignore-term block", NoRaceExitDelay)
	if err := cmd.Start(); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// trap prints every forwarded signal. Unless ignoreTerm, a signal that asks
// to end the process ends it with 128+N; with it, nothing but SIGKILL does.
func trap(ignoreTerm bool) {
	c := make(chan os.Signal, 16)
	signal.Notify(c, signals.Forwarded...)
	go func() {
		for sig := range c {
			say("signal %s", unix.SignalName(sig.(unix.Signal)))
			if signals.Ends(sig) && !ignoreTerm {
				finish(128 + signals.Number(sig))
			}
		}
	}()
}

// Monotonic reads CLOCK_MONOTONIC, which all processes of one machine share.
func Monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// appendLine appends one line with O_APPEND, so concurrent writers never
// interleave within a line.
func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		say("record: %v", err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}
