package wrap

import (
	"os"
	"strconv"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/ping"
	"github.com/redbite/leasewrap/schedule"
	"github.com/urfave/cli/v2"
)

// runOptions is everything the main command was told, parsed and checked.
type runOptions struct {
	job     string
	holder  string // empty: lease.DefaultHolder
	command []string
	store   cmdutil.StoreOptions
	timings lease.Timings
	// derived names the timings that were not set and follow the TTL.
	derived      []string
	wait         bool
	waitTimeout  time.Duration
	listen       bool
	holdFor      time.Duration
	skipExitCode int
	httpAddr     string
	pingURL      string
	pingProtocol ping.Protocol
	pingOutput   bool
	maxRuntime   time.Duration // 0: no limit
	retries      int
	retryDelay   time.Duration
	slots        int
	// priority orders this standby in the job's queue.
	priority    int
	historyKeep time.Duration
	keepOutput  int // bytes of each attempt's output kept in the history; 0: none
	// requireReplicated: see lease.WithRequireReplicated.
	requireReplicated bool
	// sched is the job's schedule (nil: run once, now); once runs the
	// time just due and exits; catchUp says what to do with late times.
	sched   *schedule.Schedule
	once    bool
	catchUp schedule.CatchUp
}

// maxKeepOutput bounds --keep-output: the output is written into the
// history row of every run, in the statement that releases the lease.
const maxKeepOutput = 1 << 20

// parseNames reads the job and this instance's holder id.
func parseNames(s cmdutil.Settings, o *runOptions) error {
	var err error
	if o.job, err = cmdutil.RequireJob(s); err != nil {
		return err
	}
	if err := cmdutil.RefuseOuterJob(s, o.job); err != nil {
		return err
	}
	if err := lease.CheckNewJob(o.job); err != nil {
		return cmdutil.NameError(s, "job", err)
	}
	o.holder, err = cmdutil.ParseHolder(s, "id")
	return err
}

// parseRunOptions reads and checks every setting of the main command. It
// touches neither the database nor the child.
func parseRunOptions(c *cli.Context, child []string, hasChild bool) (runOptions, error) {
	s := cmdutil.NewSettings(c)
	o := runOptions{command: child, wait: c.Bool("wait"), listen: c.Bool("listen"),
		httpAddr: c.String("http-addr"), requireReplicated: c.Bool("require-replicated")}
	if !hasChild {
		o.command = c.Args().Slice()
	}
	if len(o.command) == 0 {
		return o, cmdutil.Usagef("missing command: put it after --, as in leasewrap --job nightly_report -- ./generate-report")
	}
	if err := parseNames(s, &o); err != nil {
		return o, err
	}
	var err error
	if o.store, err = cmdutil.ParseStoreOptions(s); err != nil {
		return o, err
	}
	if o.timings, o.derived, err = cmdutil.ParseTimings(s); err != nil {
		return o, err
	}
	if o.waitTimeout, err = s.Duration("wait-timeout"); err != nil {
		return o, err
	}
	if o.holdFor, err = s.Duration("hold-for"); err != nil {
		return o, err
	}
	code, err := strconv.Atoi(c.String("skip-exit-code"))
	if err != nil || code < 0 || code > 255 {
		return o, cmdutil.Usagef("invalid %s %q: must be a number 0-255", s.Source("skip-exit-code"), c.String("skip-exit-code"))
	}
	o.skipExitCode = code
	if o.slots, err = strconv.Atoi(c.String("slots")); err != nil || o.slots < 1 || o.slots > lease.MaxSlots {
		return o, cmdutil.Usagef("invalid %s %q: must be a number 1-%d", s.Source("slots"), c.String("slots"), lease.MaxSlots)
	}
	if o.historyKeep, err = s.Duration("history-keep"); err != nil {
		return o, err
	}
	if err := parsePriority(s, &o); err != nil {
		return o, err
	}
	if o.keepOutput, err = s.Size("keep-output", maxKeepOutput); err != nil {
		return o, err
	}
	if err := parseAttempts(s, &o); err != nil {
		return o, err
	}
	if err := parseSchedule(s, &o); err != nil {
		return o, err
	}
	// A scheduler stands by for its database at its start as a standby
	// does; a --once line does not stand by.
	if o.waitTimeout > 0 && !o.wait && (o.sched == nil || o.once) {
		return o, cmdutil.Usagef("%s %s needs --wait, or --schedule without --once", s.Source("wait-timeout"), o.waitTimeout)
	}
	return o, nil
}

// parsePriority reads --priority, which orders standbys in their job's
// queue: it means something only for an instance that queues.
func parsePriority(s cmdutil.Settings, o *runOptions) error {
	if !s.Ctx.IsSet("priority") {
		return nil
	}
	p, err := strconv.ParseInt(s.Ctx.String("priority"), 10, 32)
	switch {
	case err != nil:
		return cmdutil.Usagef("invalid %s %q: must be a whole number, as in 10 (higher goes first; default 0)", s.Source("priority"), s.Ctx.String("priority"))
	case !o.wait:
		return cmdutil.Usagef("%s orders standbys: it needs --wait", s.Source("priority"))
	}
	o.priority = int(p)
	return nil
}

// parseSchedule reads --schedule and what goes with it, and refuses the
// settings a schedule leaves without meaning.
func parseSchedule(s cmdutil.Settings, o *runOptions) error {
	spec := s.Ctx.String("schedule")
	o.once = s.Ctx.Bool("once")
	if spec == "" {
		for _, name := range []string{"once", "timezone", "catch-up", "catch-up-window"} {
			if s.Ctx.IsSet(name) {
				return cmdutil.Usagef("%s needs --schedule (or LEASEWRAP_SCHEDULE), as in --schedule '0 2 * * *'", s.Source(name))
			}
		}
		return nil
	}
	var err error
	if o.sched, err = schedule.Parse(spec, s.Ctx.String("timezone")); err != nil {
		return cmdutil.Usagef("invalid %s: %v", s.Source("schedule"), err)
	}
	switch {
	case o.wait:
		return cmdutil.Usagef("%s means nothing with --schedule: a scheduler waits for each scheduled time itself; drop it", s.Source("wait"))
	case o.holdFor > 0:
		return cmdutil.Usagef("%s means nothing with --schedule: each scheduled time runs once, whatever the hosts' clocks; drop it", s.Source("hold-for"))
	case o.slots != 1:
		return cmdutil.Usagef("%s cannot be combined with --schedule: a scheduled time runs on one instance; drop it", s.Source("slots"))
	}
	if o.catchUp.Policy, err = schedule.ParsePolicy(s.Ctx.String("catch-up")); err != nil {
		return cmdutil.Usagef("invalid %s: %v", s.Source("catch-up"), err)
	}
	if o.catchUp.Window, err = s.Duration("catch-up-window"); err != nil {
		return err
	}
	if o.catchUp.Window <= 0 {
		return cmdutil.Usagef("invalid %s %s: must be positive, as in 24h", s.Source("catch-up-window"), s.Ctx.String("catch-up-window"))
	}
	if o.once {
		return parseOnce(s, o)
	}
	return nil
}

// parseOnce refuses what a crontab line (--once) cannot mean: catching up
// times cron did not fire for, and cron fields read in another zone than
// cron reads the line in.
func parseOnce(s cmdutil.Settings, o *runOptions) error {
	if o.catchUp.Policy == schedule.CatchUpAll {
		return cmdutil.Usagef("%s all cannot be combined with %s: a crontab line runs only the time just due, as cron does, and records older ones missed; "+
			"to catch up, run a scheduler without --once", s.Source("catch-up"), s.Source("once"))
	}
	if o.sched.Every() > 0 || o.sched.ZoneNamed() {
		return nil
	}
	name, utc := schedule.HostZone(os.Getenv, time.Now())
	if utc {
		return nil
	}
	zone, add := "(not UTC)", "--timezone NAME, the IANA name of the zone cron reads this crontab in"
	if name != "" {
		zone, add = name, "--timezone "+name
	}
	return cmdutil.Usagef("%s reads %s %q in UTC, but cron fires this line in the host's zone %s: add %s",
		s.Source("once"), s.Source("schedule"), o.sched.Spec(), zone, add)
}

// parseAttempts reads how long one run may take, how often a failed one
// is tried again, and whom to tell.
func parseAttempts(s cmdutil.Settings, o *runOptions) error {
	var err error
	if o.pingURL = s.Ctx.String("ping-url"); o.pingURL != "" {
		if _, err := ping.Parse(o.pingURL); err != nil {
			return cmdutil.Usagef("invalid %s: %v", s.Source("ping-url"), err)
		}
	}
	if o.pingProtocol, err = ping.ParseProtocol(s.Ctx.String("ping-protocol")); err != nil {
		return cmdutil.Usagef("invalid %s: %v", s.Source("ping-protocol"), err)
	}
	o.pingOutput = s.Ctx.Bool("ping-output")
	if o.maxRuntime, err = s.Duration("max-runtime"); err != nil {
		return err
	}
	if o.retryDelay, err = s.Duration("retry-delay"); err != nil {
		return err
	}
	n, err := strconv.Atoi(s.Ctx.String("retries"))
	if err != nil || n < 0 || n > 100 {
		return cmdutil.Usagef("invalid %s %q: must be a number 0-100", s.Source("retries"), s.Ctx.String("retries"))
	}
	o.retries = n
	return nil
}
