// Command fleet simulates a fleet of leasewrap instances in one process, to
// measure what one PostgreSQL spends on a large fleet, with and without
// PgBouncer in front, and how quickly leases change hands meanwhile.
//
//	fleet -url URL [-admin-url URL] [-jobs 1000] [-per-job 10] [-duration 5m]
//	      [-listen=false] [-kill 0.1] [-release 0.2] [-postmaster PID]
//	      [-pgbouncer PID] [-out FILE] [-floor [-rate N]]
//
// Each participant is what one `leasewrap --wait` process is, in a
// goroutine: one connection of its own built as lease.ConnectSession
// builds a wrapper's, with a statement counter on it, a lease.Store with
// the default timings and a holder id of its own, and Acquire. Nothing is
// shared between participants but the process: each holds its one
// connection, on which it stands by, listens and leads, exactly as
// separate processes would, so the database sees as many backends
// (directly) or clients (through PgBouncer) as a real fleet of that size.
//
// After every job has a leader, the fleet is watched for -duration. During
// it, a -kill fraction of the jobs lose their leader to a crash (its
// connection is closed without a release, as the kernel closes a killed process's
// sockets: the lease is left to expire) and a -release fraction hand theirs
// back gracefully. Either way the participant comes back as a standby 1-5 s
// later, with a new connection and holder id, as a restarted wrapper would.
//
// It reports, as JSON on -out: the database's CPU seconds per second from
// the kernel's accounting of the postmaster and its children (-postmaster),
// PgBouncer's (-pgbouncer) and its own; commits and transaction ids per
// second; the statements the participants sent per second (a pgx tracer
// on each one's connections counts them); connections held; the handoff
// after a graceful release (release called until another participant
// holds the lease); the takeover after a crash, from the kill and from the
// expiry the dead leader left in the row; the standbys' writes per
// handoff: the takes and adopts that participants sent while standing by,
// whether they got the lease or not, over the graceful handoffs and crash
// takeovers completed in the measurement; and violations: a job acquired
// while another participant still held it (checked at every acquisition),
// a fencing token that did not rise, and, from the history table once the
// fleet has stopped, two runs of one job with different tokens whose
// [started_at, finished_at) overlap.
//
// With -floor it runs no fleet but its reference: as many connections as
// the fleet would have standbys, each sending SELECT 1 once per default
// retry interval, or together -rate a second (a fleet's own
// statements_per_s), and reports the same CPU figures and the statements
// per second (see pollFloor).
//
// -admin-url (default: -url) must reach PostgreSQL itself, in the same
// database: it migrates the table, reads the statistics and checks the
// history. Use a database of its own, so that its statistics hold nothing
// but the fleet's. bench/run.sh runs it against a throwaway cluster.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redbite/leasewrap/lease"
)

// config is the command line.
type config struct {
	url, adminURL, table, out string
	jobs, perJob              int
	duration                  time.Duration
	listen                    bool
	kill, release             float64
	startRate                 int
	postmaster, pgbouncer     int
	floor                     bool
	rate                      float64
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "", "connection string the participants use (PostgreSQL or PgBouncer)")
	flag.StringVar(&c.adminURL, "admin-url", "", "connection string to PostgreSQL itself, same database (default: -url)")
	flag.StringVar(&c.table, "table", lease.DefaultTable, "lease table")
	flag.StringVar(&c.out, "out", "-", "where to write the JSON result (- for stdout)")
	flag.IntVar(&c.jobs, "jobs", 1000, "jobs")
	flag.IntVar(&c.perJob, "per-job", 10, "participants per job: one leader, the rest standing by")
	flag.DurationVar(&c.duration, "duration", 5*time.Minute, "how long the fleet is measured, after every job has a leader")
	flag.BoolVar(&c.listen, "listen", true, "standbys listen for releases (false: they poll, as through PgBouncer in transaction mode)")
	flag.Float64Var(&c.kill, "kill", 0.1, "fraction of the jobs whose leader crashes during the run")
	flag.Float64Var(&c.release, "release", 0.2, "fraction of the jobs whose leader releases gracefully during the run")
	flag.IntVar(&c.startRate, "start-rate", 250, "participants started per second before the measurement")
	flag.IntVar(&c.postmaster, "postmaster", 0, "PID of the postmaster, whose and whose children's CPU time is the database's (0: not measured)")
	flag.IntVar(&c.pgbouncer, "pgbouncer", 0, "PID of PgBouncer, to measure its CPU time too (0: not measured)")
	flag.BoolVar(&c.floor, "floor", false, "instead of a fleet, measure its polling floor: as many connections as it has standbys, each sending SELECT 1 once per default retry interval")
	flag.Float64Var(&c.rate, "rate", 0, "with -floor: the statements per second all its connections send together, spread evenly over them (0: each once per default retry interval)")
	flag.Parse()
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(64)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res any
	var err error
	if c.floor {
		res, err = pollFloor(ctx, c)
	} else {
		res, err = run(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
	if err := write(c.out, res); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// check refuses a command line that cannot describe a fleet.
func (c *config) check() error {
	if c.adminURL == "" {
		c.adminURL = c.url
	}
	switch {
	case c.url == "":
		return fmt.Errorf("-url is required: a connection string such as postgres://postgres@127.0.0.1:5432/fleet")
	case c.jobs < 1 || c.perJob < 1:
		return fmt.Errorf("-jobs %d and -per-job %d must be at least 1", c.jobs, c.perJob)
	case c.kill < 0 || c.release < 0 || c.kill+c.release > 1:
		return fmt.Errorf("-kill %g and -release %g must be fractions adding up to at most 1", c.kill, c.release)
	case c.duration <= releaseLead:
		return fmt.Errorf("-duration %s must be more than %s: releases are planned up to %s before the end", c.duration, releaseLead, releaseLead)
	case c.startRate < 1:
		return fmt.Errorf("-start-rate %d must be at least 1", c.startRate)
	case c.rate < 0:
		return fmt.Errorf("-rate %g must be 0 (once per default retry interval) or statements per second above 0", c.rate)
	case c.rate > 0 && !c.floor:
		return fmt.Errorf("-rate %g is for -floor only: a fleet sends what its participants send", c.rate)
	case c.floor && c.perJob < 2:
		return fmt.Errorf("-per-job %d leaves the floor no standbys: it must be at least 2 with -floor", c.perJob)
	}
	_, err := lease.ParseTable(c.table)
	return err
}

// write writes res as indented JSON to path, or to stdout for "-".
func write(path string, res any) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
