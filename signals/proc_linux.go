//go:build linux

package signals

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Processes reads the process table from /proc. A process that exits
// while the table is read, or whose entry cannot be read (another user's,
// under hidepid), is left out; only an unreadable /proc is an error.
func Processes() ([]Process, error) {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	procs := make([]Process, 0, len(names))
	buf := make([]byte, 512) // the fields needed come well within it
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue // not a process: /proc/self, /proc/meminfo, ...
		}
		if p, err := readStat(pid, buf); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

var errStatFormat = errors.New("unexpected /proc/<pid>/stat format")

// readStat reads a process's state, parent and group from /proc/<pid>/stat:
// "pid (comm) state ppid pgrp ...". comm may hold spaces and parentheses,
// so the fields are counted from the last ')'.
func readStat(pid int, buf []byte) (Process, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Process{}, err
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return Process{}, err // ESRCH: it exited between open and read
	}
	return parseStat(pid, buf[:n])
}

func parseStat(pid int, stat []byte) (Process, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Process{}, errStatFormat
	}
	rest := stat[i+1:]
	var fields [3][]byte // state, ppid, pgrp
	for k := range fields {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end <= 0 {
			return Process{}, errStatFormat
		}
		fields[k], rest = rest[:end], rest[end:]
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	pgid, err2 := strconv.Atoi(string(fields[2]))
	if err1 != nil || err2 != nil {
		return Process{}, errStatFormat
	}
	// X (dead) is a zombie being reaped at this moment.
	zombie := fields[0][0] == 'Z' || fields[0][0] == 'X'
	return Process{Pid: pid, PPid: ppid, Pgid: pgid, Zombie: zombie}, nil
}
