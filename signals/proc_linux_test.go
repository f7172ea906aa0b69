//go:build linux

package signals

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want Process
	}{
		{"42 (sleep) S 7 42 7 0 -1 4194560 90 0 0 0\n", Process{Pid: 42, PPid: 7, Pgid: 42}},
		// comm may hold spaces and parentheses.
		{"42 (a) Z 9 (b) c) Z 7 8 7 0", Process{Pid: 42, PPid: 7, Pgid: 8, Zombie: true}},
		{"42 (x) X 7 8 7", Process{Pid: 42, PPid: 7, Pgid: 8, Zombie: true}},
	} {
		got, err := parseStat(42, []byte(tc.stat))
		if err != nil || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", tc.stat, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "42 (x", "42 (x) S", "42 (x) S 7", "42 (x) S a 8 7"} {
		if _, err := parseStat(42, []byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

func TestProcessesSeesThisProcessAndItsZombie(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Wait for it to exit without reaping it, so it stays a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	procs, err := Processes()
	if err != nil {
		t.Fatal(err)
	}
	var self, zombie bool
	for _, p := range procs {
		switch p.Pid {
		case os.Getpid():
			self = p.PPid == os.Getppid() && p.Pgid == unix.Getpgrp() && !p.Zombie
		case pid:
			zombie = p.PPid == os.Getpid() && p.Zombie
		}
	}
	if !self {
		t.Errorf("this process (%d, parent %d) not found as such in %d processes", os.Getpid(), os.Getppid(), len(procs))
	}
	if !zombie {
		t.Errorf("exited child %d not found as a zombie of this process", pid)
	}
}
