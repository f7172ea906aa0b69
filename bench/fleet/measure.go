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

	"github.com/jackc/pgx/v5/pgxpool"
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
	// statements, takes and adopts are the fleet's counts (see counts).
	statements, takes, adopts int64
	// memKiB and procs: see clusterMemory; read at the end only, after
	// the rest (reading it costs kernel time of its own).
	memKiB int64
	procs  int
}

// sample reads the counters: CPU times from the kernel, commits from
// pg_stat_database (of the fleet's database), the next transaction id
// (reading it assigns none) and the statements the participants sent.
func (f *fleet) sample(ctx context.Context) (snapshot, error) {
	statements, takes, adopts := f.counts.statements.Load(), f.counts.takes.Load(), f.counts.adopts.Load()
	s, err := sample(ctx, f.cfg, f.stats, f.dbname)
	s.statements, s.takes, s.adopts = statements, takes, adopts
	return s, err
}

// sample reads the counters of the processes c names and of database
// dbname, through stats (connected to another database).
func sample(ctx context.Context, c config, stats *pgxpool.Pool, dbname string) (snapshot, error) {
	s := snapshot{at: time.Now(), self: selfCPU()}
	if c.postmaster > 0 {
		s.dbTicks = clusterTicks(c.postmaster)
	}
	if c.pgbouncer > 0 {
		s.pgbTicks, _, _ = procTicks(c.pgbouncer)
	}
	err := stats.QueryRow(ctx, `SELECT xact_commit, pg_snapshot_xmax(pg_current_snapshot())::text::bigint
FROM pg_stat_database WHERE datname = $1`, dbname).Scan(&s.commits, &s.nextXid)
	if err != nil {
		return s, fmt.Errorf("cannot read the database's statistics: %w", err)
	}
	return s, nil
}

// clusterMemory sums the proportional set size (PSS: private memory plus
// a share of what is shared) of the postmaster's children, in KiB, and
// counts them: what the cluster's backends cost in memory.
func clusterMemory(postmaster int) (kib int64, procs int) {
	for _, pid := range children(postmaster) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				kib += n
				procs++
				break
			}
		}
	}
	return kib, procs
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range dir {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if _, _, parent := procTicks(child); parent == pid {
			out = append(out, child)
		}
	}
	return out
}

// clusterTicks is the CPU time of the postmaster, of its children alive
// now, and of those it has reaped (its cutime and cstime): a backend that
// ends between two readings was counted as a live child in the first and
// in the postmaster's cutime in the second, so the difference is exact.
func clusterTicks(postmaster int) int64 {
	own, reaped, _ := procTicks(postmaster)
	total := own + reaped
	for _, pid := range children(postmaster) {
		ticks, _, _ := procTicks(pid)
		total += ticks
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
