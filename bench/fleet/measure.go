package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: Linux fixes it
// at 100 for user space, whatever the kernel's own tick.
const userHZ = 100

// snapshot is the counters read at the start and the end of the
// measurement.
type snapshot struct {
	at                time.Time
	dbTicks, pgbTicks int64
	self              time.Duration
	commits, nextXid  int64
}

// sample reads the counters: CPU times from the kernel, commits from
// pg_stat_database (of the fleet's database) and the next transaction id
// (reading it assigns none).
func (f *fleet) sample(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), self: selfCPU()}
	if f.cfg.postmaster > 0 {
		s.dbTicks = clusterTicks(f.cfg.postmaster)
	}
	if f.cfg.pgbouncer > 0 {
		s.pgbTicks, _, _ = procTicks(f.cfg.pgbouncer)
	}
	err := f.admin.QueryRow(ctx, `SELECT xact_commit, pg_snapshot_xmax(pg_current_snapshot())::text::bigint
FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits, &s.nextXid)
	if err != nil {
		return s, fmt.Errorf("cannot read the database's statistics: %w", err)
	}
	return s, nil
}

// clusterTicks is the CPU time of the postmaster, of its children alive
// now, and of those it has reaped (its cutime and cstime): a backend that
// ends between two readings was counted as a live child in the first and
// in the postmaster's cutime in the second, so the difference is exact.
func clusterTicks(postmaster int) int64 {
	own, reaped, _ := procTicks(postmaster)
	total := own + reaped
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return total
	}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		ticks, _, parent := procTicks(pid)
		if parent == postmaster {
			total += ticks
		}
	}
	return total
}

// procTicks reads a process's own CPU time (utime + stime), that of its
// reaped children (cutime + cstime), and its parent.
func procTicks(pid int) (own, reaped int64, parent int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0
	}
	// The command name may hold spaces and parentheses: fields are counted
	// from the last ')'. After it come state (field 3), ppid (4), ...
	// utime (14), stime (15), cutime (16), cstime (17).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 15 {
		return 0, 0, 0
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(fields[k-3], 10, 64); return v }
	return n(14) + n(15), n(16) + n(17), int(n(4))
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile returns the p-th percentile (0 < p <= 1) of v by the
// nearest-rank method, v sorted; 0 for none.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	k := int(float64(len(v))*p+0.999999) - 1
	return v[max(0, min(k, len(v)-1))]
}

// spread is a distribution's size, median, p99 and worst.
type spread struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func spreadOf(v []float64) spread {
	slices.Sort(v)
	s := spread{N: len(v), P50: percentile(v, 0.5), P99: percentile(v, 0.99)}
	if len(v) > 0 {
		s.Max = v[len(v)-1]
	}
	return s
}
