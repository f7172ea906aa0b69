package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/ping"
	"github.com/redbite/leasewrap/schedule"
)

// runOptions is everything the main command was told, parsed and checked.
type runOptions struct {
	job     string
	holder  string // empty: lease.DefaultHolder
	command []string
	store   storeOptions
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
	historyKeep  time.Duration
	keepOutput   int // bytes of each attempt's output kept in the history; 0: none
	// requireReplicated: see lease.WithRequireReplicated.
	requireReplicated bool
	// sched is the job's schedule (nil: run once, now); once runs the
	// time just due and exits; catchUp says what to do with late times.
	sched   *schedule.Schedule
	once    bool
	catchUp schedule.CatchUp
}

// storeOptions are the settings of every command that talks to the table.
type storeOptions struct {
	databaseURL string
	table       string
	logLevel    zerolog.Level
	logFormat   string
}

// settings reads a command's flags, and knows whether each came from the
// command line or from the environment, so a message can name the right one.
type settings struct {
	c    *cli.Context
	args []string // leasewrap's own command line
}

// argsKey is where run keeps leasewrap's own command line in the app's
// metadata, for settings to tell flags from environment variables.
const argsKey = "args"

func newSettings(c *cli.Context) settings {
	args, _ := c.App.Metadata[argsKey].([]string)
	return settings{c: c, args: args}
}

// source names where a setting came from: "--ttl", or
// "LEASEWRAP_TTL (--ttl)" when the environment set it.
func (s settings) source(name string) string {
	if fromCommandLine(s.args, name) {
		return "--" + name
	}
	flags := s.c.App.Flags
	if s.c.Command != nil {
		flags = append(slices.Clone(flags), s.c.Command.Flags...)
	}
	for _, f := range flags {
		ev, ok := f.(interface{ GetEnvVars() []string })
		if !ok || !slices.Contains(f.Names(), name) {
			continue
		}
		for _, env := range ev.GetEnvVars() {
			if v, ok := os.LookupEnv(env); ok && v != "" {
				return env + " (--" + name + ")"
			}
		}
	}
	return "--" + name
}

// durationLimit bounds a duration setting: far beyond any sensible use, and
// short of where the sums and deadlines made from it would overflow.
type durationLimit struct {
	max  time.Duration
	text string
}

// durationLimits holds each duration setting to its bound; others take
// defaultDurationLimit.
var durationLimits = func() map[string]durationLimit {
	const day = 24 * time.Hour
	timing, long := durationLimit{day, "24h"}, durationLimit{365 * day, "8760h (365 days)"}
	return map[string]durationLimit{
		"ttl": timing, "renew-interval": timing, "grace": timing, "retry-interval": timing,
		"wait-timeout": long, "hold-for": long, "max-runtime": long, "retry-delay": {maxRetryDelay, "10m"},
		"history-keep": defaultDurationLimit, "max-age": defaultDurationLimit, "catch-up-window": long,
	}
}()

var defaultDurationLimit = durationLimit{3650 * 24 * time.Hour, "87600h (3650 days)"}

// duration parses a duration setting, with a hint for the common mistakes,
// and holds it to its limit.
func (s settings) duration(name string) (time.Duration, error) {
	text := s.c.String(name)
	limit, ok := durationLimits[name]
	if !ok {
		limit = defaultDurationLimit
	}
	d, err := time.ParseDuration(text)
	switch {
	case err == nil && d < 0:
		return 0, usagef("invalid %s %s: must not be negative, as in 30s", s.source(name), text)
	case err == nil && d > limit.max:
		return 0, usagef("invalid %s %s: must be at most %s", s.source(name), text, limit.text)
	case err == nil:
		return d, nil
	}
	if text != "" && strings.Trim(text, "0123456789.") == "" {
		return 0, usagef("invalid %s %q: durations need a unit, as in %ss", s.source(name), text, text)
	}
	return 0, usagef("invalid %s %q: want a duration such as 30s, 2m or 500ms, at most %s", s.source(name), text, limit.text)
}

// maxKeepOutput bounds --keep-output: the output is written into the
// history row of every run, in the statement that releases the lease.
const maxKeepOutput = 1 << 20

// sizeUnits are the suffixes a size setting may have, by their multiple:
// binary units only, so that no one wonders whether a KB is 1000 or 1024.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}}

// size parses a size setting in bytes (a whole number, with KiB, MiB or B
// or no unit) of at most limit bytes.
func (s settings) size(name string, limit int64) (int, error) {
	text := s.c.String(name)
	for _, u := range sizeUnits {
		digits, ok := strings.CutSuffix(text, u.suffix)
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n > limit/u.bytes {
			break
		}
		return int(n * u.bytes), nil
	}
	return 0, usagef("invalid %s %q: want a size in bytes, KiB or MiB such as 65536, 64KiB or 1MiB, at most %s (0: off)",
		s.source(name), text, formatSize(limit))
}

// formatSize writes n bytes as size settings are written.
func formatSize(n int64) string {
	for _, u := range sizeUnits {
		if n >= u.bytes && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseRunOptions reads and checks every setting of the main command. It
// touches neither the database nor the child.
func parseRunOptions(c *cli.Context, child []string, hasChild bool) (runOptions, error) {
	s := newSettings(c)
	o := runOptions{command: child, holder: c.String("id"), wait: c.Bool("wait"), listen: c.Bool("listen"),
		httpAddr: c.String("http-addr"), requireReplicated: c.Bool("require-replicated")}
	if !hasChild {
		o.command = c.Args().Slice()
	}
	if len(o.command) == 0 {
		return o, usagef("missing command: put it after --, as in leasewrap --job nightly_report -- ./generate-report")
	}
	var err error
	if o.job, err = requireJob(s); err != nil {
		return o, err
	}
	if err := refuseOuterJob(s, o.job); err != nil {
		return o, err
	}
	if err := lease.CheckNewJob(o.job); err != nil {
		return o, usagef("invalid %s: %v", s.source("job"), err)
	}
	if o.holder != "" {
		if err := lease.CheckHolder(o.holder); err != nil {
			return o, usagef("invalid %s: %v", s.source("id"), err)
		}
	}
	if o.store, err = parseStoreOptions(s); err != nil {
		return o, err
	}
	if o.timings, o.derived, err = parseTimings(s); err != nil {
		return o, err
	}
	if o.waitTimeout, err = s.duration("wait-timeout"); err != nil {
		return o, err
	}
	if o.waitTimeout > 0 && !o.wait {
		return o, usagef("%s %s needs --wait", s.source("wait-timeout"), o.waitTimeout)
	}
	if o.holdFor, err = s.duration("hold-for"); err != nil {
		return o, err
	}
	code, err := strconv.Atoi(c.String("skip-exit-code"))
	if err != nil || code < 0 || code > 255 {
		return o, usagef("invalid %s %q: must be a number 0-255", s.source("skip-exit-code"), c.String("skip-exit-code"))
	}
	o.skipExitCode = code
	if o.slots, err = strconv.Atoi(c.String("slots")); err != nil || o.slots < 1 || o.slots > lease.MaxSlots {
		return o, usagef("invalid %s %q: must be a number 1-%d", s.source("slots"), c.String("slots"), lease.MaxSlots)
	}
	if o.historyKeep, err = s.duration("history-keep"); err != nil {
		return o, err
	}
	if o.keepOutput, err = s.size("keep-output", maxKeepOutput); err != nil {
		return o, err
	}
	if err := parseAttempts(s, &o); err != nil {
		return o, err
	}
	return o, parseSchedule(s, &o)
}

// parseSchedule reads --schedule and what goes with it, and refuses the
// settings a schedule leaves without meaning.
func parseSchedule(s settings, o *runOptions) error {
	spec := s.c.String("schedule")
	o.once = s.c.Bool("once")
	if spec == "" {
		for _, name := range []string{"once", "timezone", "catch-up", "catch-up-window"} {
			if s.c.IsSet(name) {
				return usagef("%s needs --schedule (or LEASEWRAP_SCHEDULE), as in --schedule '0 2 * * *'", s.source(name))
			}
		}
		return nil
	}
	var err error
	if o.sched, err = schedule.Parse(spec, s.c.String("timezone")); err != nil {
		return usagef("invalid %s: %v", s.source("schedule"), err)
	}
	switch {
	case o.wait:
		return usagef("%s means nothing with --schedule: a scheduler waits for each scheduled time itself; drop it", s.source("wait"))
	case o.holdFor > 0:
		return usagef("%s means nothing with --schedule: each scheduled time runs once, whatever the hosts' clocks; drop it", s.source("hold-for"))
	case o.slots != 1:
		return usagef("%s cannot be combined with --schedule: a scheduled time runs on one instance; drop it", s.source("slots"))
	}
	if o.catchUp.Policy, err = schedule.ParsePolicy(s.c.String("catch-up")); err != nil {
		return usagef("invalid %s: %v", s.source("catch-up"), err)
	}
	if o.catchUp.Window, err = s.duration("catch-up-window"); err != nil {
		return err
	}
	if o.catchUp.Window <= 0 {
		return usagef("invalid %s %s: must be positive, as in 24h", s.source("catch-up-window"), s.c.String("catch-up-window"))
	}
	if o.once {
		return parseOnce(s, o)
	}
	return nil
}

// parseOnce refuses what a crontab line (--once) cannot mean: catching up
// times cron did not fire for, and cron fields read in another zone than
// cron reads the line in.
func parseOnce(s settings, o *runOptions) error {
	if o.catchUp.Policy == schedule.CatchUpAll {
		return usagef("%s all cannot be combined with %s: a crontab line runs only the time just due, as cron does, and records older ones missed; "+
			"to catch up, run a scheduler without --once", s.source("catch-up"), s.source("once"))
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
	return usagef("%s reads %s %q in UTC, but cron fires this line in the host's zone %s: add %s",
		s.source("once"), s.source("schedule"), o.sched.Spec(), zone, add)
}

// parseAttempts reads how long one run may take, how often a failed one
// is tried again, and whom to tell.
func parseAttempts(s settings, o *runOptions) error {
	var err error
	if o.pingURL = s.c.String("ping-url"); o.pingURL != "" {
		if _, err := ping.Parse(o.pingURL); err != nil {
			return usagef("invalid %s: %v", s.source("ping-url"), err)
		}
	}
	if o.pingProtocol, err = ping.ParseProtocol(s.c.String("ping-protocol")); err != nil {
		return usagef("invalid %s: %v", s.source("ping-protocol"), err)
	}
	o.pingOutput = s.c.Bool("ping-output")
	if o.maxRuntime, err = s.duration("max-runtime"); err != nil {
		return err
	}
	if o.retryDelay, err = s.duration("retry-delay"); err != nil {
		return err
	}
	n, err := strconv.Atoi(s.c.String("retries"))
	if err != nil || n < 0 || n > 100 {
		return usagef("invalid %s %q: must be a number 0-100", s.source("retries"), s.c.String("retries"))
	}
	o.retries = n
	return nil
}

// parseJob reads --job where it is optional (status, history): "" when
// it is not set.
func parseJob(s settings) (string, error) {
	job := s.c.String("job")
	if job == "" {
		return "", nil
	}
	if err := lease.CheckJob(job); err != nil {
		return "", usagef("invalid %s: %v", s.source("job"), err)
	}
	return job, nil
}

// sayJobFromEnv says on stderr that status or history shows only job, as
// LEASEWRAP_JOB asked and not the command line: after sourcing a unit's
// environment file, a table of one job must not pass for every job's.
func sayJobFromEnv(s settings, job string) {
	if job != "" && !fromCommandLine(s.args, "job") {
		fmt.Fprintf(s.c.App.ErrWriter, "leasewrap: showing job %q only, as LEASEWRAP_JOB says; --job '' shows every job\n", job)
	}
}

// requireJob reads --job where it must be set (the main command, release,
// check).
func requireJob(s settings) (string, error) {
	if s.c.String("job") == "" {
		return "", usagef("missing --job (or LEASEWRAP_JOB): name the lease, as in --job nightly_report")
	}
	return parseJob(s)
}

// refuseOuterJob refuses, for the main command, a job read from
// LEASEWRAP_JOB inside a leasewrap's command: it names the outer job, and
// a nested leasewrap that took it for its own would always sit out. Other
// commands may use it: `release` and `check` of the job one runs under are
// what a command may well ask.
func refuseOuterJob(s settings, job string) error {
	if !fromCommandLine(s.args, "job") && os.Getenv("LEASEWRAP_FENCING_TOKEN") != "" {
		return usagef("LEASEWRAP_JOB=%s is the job of the leasewrap this runs under: name this one's with --job", job)
	}
	return nil
}

// logLevels are the documented --log-level values.
var logLevels = map[string]zerolog.Level{
	"trace": zerolog.TraceLevel, "debug": zerolog.DebugLevel, "info": zerolog.InfoLevel,
	"warn": zerolog.WarnLevel, "error": zerolog.ErrorLevel,
}

func parseStoreOptions(s settings) (storeOptions, error) {
	o := storeOptions{databaseURL: s.c.String("database-url"), table: s.c.String("table"),
		logFormat: s.c.String("log-format")}
	if _, err := lease.ParseTable(o.table); err != nil {
		return o, usagef("invalid %s: %v", s.source("table"), err)
	}
	level, ok := logLevels[s.c.String("log-level")]
	if !ok {
		return o, usagef("invalid %s %q: use trace, debug, info, warn or error", s.source("log-level"), s.c.String("log-level"))
	}
	o.logLevel = level
	switch o.logFormat {
	case "json", "console", "auto":
	default:
		return o, usagef("invalid %s %q: use json, console or auto", s.source("log-format"), o.logFormat)
	}
	return o, nil
}

// parseTimings reads the four timings. Those not set follow the TTL
// (lease.TimingsFor, as lease.New does); the result must pass lease's
// safety rule, and a refusal lists every value to change with numbers that
// satisfy it. Each timing's flag is named as its lease.Setting.
func parseTimings(s settings) (lease.Timings, []string, error) {
	ttl, err := s.duration(string(lease.SettingTTL))
	if err != nil {
		return lease.Timings{}, nil, err
	}
	set := map[lease.Setting]time.Duration{}
	var derived []string
	for _, setting := range []lease.Setting{lease.SettingRenewInterval, lease.SettingGrace, lease.SettingRetryInterval} {
		name := string(setting)
		if !s.c.IsSet(name) {
			derived = append(derived, name)
			continue
		}
		if set[setting], err = s.duration(name); err != nil {
			return lease.Timings{}, nil, err
		}
	}
	t := lease.TimingsFor(ttl, set)
	err = t.Check()
	var te *lease.TimingError
	if !errors.As(err, &te) {
		return t, derived, err
	}
	if len(te.Settings) == 1 {
		name := string(te.Settings[0])
		if slices.Contains(derived, name) {
			// Said without the value that follows, which is rounded to
			// milliseconds and may read 0s.
			return t, nil, usagef("invalid %s %s: too short: the --%s that follows from it (%s) %s; use --ttl %s or longer",
				s.source("ttl"), ttl, name, derivedRatio[te.Settings[0]], derivedFloor[te.Settings[0]], minTTL(ttl, set))
		}
		return t, nil, usagef("invalid %s %s: %s", s.source(name), s.c.String(name), te.Msg)
	}
	longer := describeTimings(lease.Timings{TTL: t.MinTTL(), RenewInterval: t.RenewInterval, Grace: t.Grace, RetryInterval: t.RetryInterval}, lease.SettingTTL)
	if te.Fix.Check() != nil {
		// No timings fit a TTL this short: offering its scaled values
		// (rounded, they read 0s) would be a second refusal.
		return t, nil, usagef("timings do not fit: %s; use %s", te.Msg, longer)
	}
	return t, nil, usagef("timings do not fit: %s; use %s, or %s", te.Msg, longer,
		describeTimings(te.Fix, lease.SettingRenewInterval, lease.SettingGrace, lease.SettingRetryInterval))
}

// derivedRatio says how each timing not set follows the TTL
// (lease.DeriveTimings).
var derivedRatio = map[lease.Setting]string{
	lease.SettingRenewInterval: "ttl/3", lease.SettingGrace: "ttl*2/9", lease.SettingRetryInterval: "ttl*2/45",
}

// derivedFloor says what each timing that follows the TTL must be
// (lease.Timings.Check).
var derivedFloor = map[lease.Setting]string{
	lease.SettingRenewInterval: "must be at least " + lease.MinRenewInterval.String(),
	lease.SettingRetryInterval: "must be at least " + lease.MinRetryInterval.String(),
	lease.SettingGrace:         "must be at least 1ms",
}

// minTTL is the shortest TTL, from ttl up and in whole milliseconds, with
// which the timings in set and those that follow the TTL pass
// lease.Timings.Check (each timing that follows grows with the TTL). It
// returns the longest TTL allowed when none is.
func minTTL(ttl time.Duration, set map[lease.Setting]time.Duration) time.Duration {
	lo, hi := ttl.Truncate(time.Millisecond), durationLimits[string(lease.SettingTTL)].max
	if lease.TimingsFor(hi, set).Check() != nil {
		return hi
	}
	for hi-lo > time.Millisecond {
		mid := (lo + (hi-lo)/2).Truncate(time.Millisecond)
		if lease.TimingsFor(mid, set).Check() == nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// describeTimings spells out a fix: the named flags with t's values, and
// the TTL it goes with.
func describeTimings(t lease.Timings, settings ...lease.Setting) string {
	var parts []string
	for _, setting := range settings {
		parts = append(parts, fmt.Sprintf("--%s %s", setting, setting.Of(t)))
	}
	if settings[0] != lease.SettingTTL {
		parts = append(parts, fmt.Sprintf("(with --ttl %s; or leave them unset to follow it)", t.TTL))
	}
	return strings.Join(parts, " ")
}

// logTimeFormat is the time of every JSON log line: handoffs take
// milliseconds. zerolog reads it from a package variable, for its console
// writer too, so it is set once, before any logger exists.
const logTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func init() { zerolog.TimeFieldFormat = logTimeFormat }

// newLogger builds the logger the settings ask for. Logs go to stderr
// through redact, which every log line passes: no password gets out.
// The console format has colours only on a terminal, and not when NO_COLOR
// is set (no-color.org).
func newLogger(o storeOptions, redact *redactor) zerolog.Logger {
	var w io.Writer = os.Stderr
	tty := isatty.IsTerminal(os.Stderr.Fd())
	if o.logFormat == "console" || o.logFormat == "auto" && tty {
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000", NoColor: !tty || os.Getenv("NO_COLOR") != ""}
	}
	out := zerolog.New(redact.writer(w)) // JSON, redacted before any formatting
	return out.Level(o.logLevel).With().Timestamp().Logger()
}
