package cmdutil

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

	"github.com/redbite/leasewrap/internal/redact"
	"github.com/redbite/leasewrap/lease"
)

// StoreOptions are the settings of every command that talks to the table.
type StoreOptions struct {
	DatabaseURL string
	Table       string
	LogLevel    zerolog.Level
	LogFormat   string
}

// Settings reads a command's flags, and knows whether each came from the
// command line or from the environment, so a message can name the right one.
type Settings struct {
	Ctx  *cli.Context
	Args []string // leasewrap's own command line
}

// ArgsKey is where run keeps leasewrap's own command line in the app's
// metadata, for settings to tell flags from environment variables.
const ArgsKey = "args"

// NewSettings reads the settings of the command c runs.
func NewSettings(c *cli.Context) Settings {
	args, _ := c.App.Metadata[ArgsKey].([]string)
	return Settings{Ctx: c, Args: args}
}

// Source names where a setting came from: "--ttl", or
// "LEASEWRAP_TTL (--ttl)" when the environment set it.
func (s Settings) Source(name string) string {
	if fromCommandLine(s.Args, name) {
		return "--" + name
	}
	flags := s.Ctx.App.Flags
	if s.Ctx.Command != nil {
		flags = append(slices.Clone(flags), s.Ctx.Command.Flags...)
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
		"wait-timeout": long, "hold-for": long, "max-runtime": long, "retry-delay": {MaxRetryDelay, "10m"},
		"history-keep": defaultDurationLimit, "max-age": defaultDurationLimit, "catch-up-window": long,
	}
}()

var defaultDurationLimit = durationLimit{3650 * 24 * time.Hour, "87600h (3650 days)"}

// Duration parses a duration setting, with a hint for the common mistakes,
// and holds it to its limit.
func (s Settings) Duration(name string) (time.Duration, error) {
	text := s.Ctx.String(name)
	limit, ok := durationLimits[name]
	if !ok {
		limit = defaultDurationLimit
	}
	d, err := time.ParseDuration(text)
	switch {
	case err == nil && d < 0:
		return 0, Usagef("invalid %s %s: must not be negative, as in 30s", s.Source(name), text)
	case err == nil && d > limit.max:
		return 0, Usagef("invalid %s %s: must be at most %s", s.Source(name), text, limit.text)
	case err == nil:
		return d, nil
	}
	if text != "" && strings.Trim(text, "0123456789.") == "" {
		return 0, Usagef("invalid %s %q: durations need a unit, as in %ss", s.Source(name), text, text)
	}
	return 0, Usagef("invalid %s %q: want a duration such as 30s, 2m or 500ms, at most %s", s.Source(name), text, limit.text)
}

// sizeUnits are the suffixes a size setting may have, by their multiple:
// binary units only, so that no one wonders whether a KB is 1000 or 1024.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}}

// Size parses a size setting in bytes (a whole number, with KiB, MiB or B
// or no unit) of at most limit bytes.
func (s Settings) Size(name string, limit int64) (int, error) {
	text := s.Ctx.String(name)
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
	return 0, Usagef("invalid %s %q: want a size in bytes, KiB or MiB such as 65536, 64KiB or 1MiB, at most %s (0: off)",
		s.Source(name), text, FormatSize(limit))
}

// FormatSize writes n bytes as size settings are written.
func FormatSize(n int64) string {
	for _, u := range sizeUnits {
		if n >= u.bytes && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseJob reads --job where it is optional (status, history): "" when
// it is not set.
func ParseJob(s Settings) (string, error) {
	job := s.Ctx.String("job")
	if job == "" {
		return "", nil
	}
	if err := lease.CheckJob(job); err != nil {
		return "", NameError(s, "job", err)
	}
	if err := lease.CheckEdges("job name", job); err != nil {
		return "", NameError(s, "job", err)
	}
	return job, nil
}

// ParseHolder reads a holder id setting (--id, release's --to): "" when
// it is not set.
func ParseHolder(s Settings, name string) (string, error) {
	id := s.Ctx.String(name)
	if id == "" {
		return "", nil
	}
	if err := lease.CheckHolder(id); err != nil {
		return "", NameError(s, name, err)
	}
	return id, nil
}

// NameError is the usage error for err, lease's refusal of the job name or
// holder id that setting name holds. White space at either end is named
// with the value, which the rest of the message does not quote.
func NameError(s Settings, name string, err error) error {
	var edge *lease.EdgeSpaceError
	if errors.As(err, &edge) {
		return Usagef("%s %q: %v", s.Source(name), s.Ctx.String(name), err)
	}
	return Usagef("invalid %s: %v", s.Source(name), err)
}

// SayJobFromEnv says on stderr that status or history shows only job, as
// LEASEWRAP_JOB asked and not the command line: after sourcing a unit's
// environment file, a table of one job must not pass for every job's.
func SayJobFromEnv(s Settings, job string) {
	if job != "" && !fromCommandLine(s.Args, "job") {
		fmt.Fprintf(s.Ctx.App.ErrWriter, "leasewrap: showing job %q only, as LEASEWRAP_JOB says; --job '' shows every job\n", job)
	}
}

// RequireJob reads --job where it must be set (the main command, release,
// check).
func RequireJob(s Settings) (string, error) {
	if s.Ctx.String("job") == "" {
		return "", Usagef("missing --job (or LEASEWRAP_JOB): name the lease, as in --job nightly_report")
	}
	return ParseJob(s)
}

// RefuseOuterJob refuses, for the main command, a job read from
// LEASEWRAP_JOB inside a leasewrap's command: it names the outer job, and
// a nested leasewrap that took it for its own would always sit out. Other
// commands may use it: `release` and `check` of the job one runs under are
// what a command may well ask.
func RefuseOuterJob(s Settings, job string) error {
	if !fromCommandLine(s.Args, "job") && os.Getenv("LEASEWRAP_FENCING_TOKEN") != "" {
		return Usagef("LEASEWRAP_JOB=%s is the job of the leasewrap this runs under: name this one's with --job", job)
	}
	return nil
}

// logLevels are the documented --log-level values.
var logLevels = map[string]zerolog.Level{
	"trace": zerolog.TraceLevel, "debug": zerolog.DebugLevel, "info": zerolog.InfoLevel,
	"warn": zerolog.WarnLevel, "error": zerolog.ErrorLevel,
}

// ParseStoreOptions reads and checks the settings of every command that
// talks to the table.
func ParseStoreOptions(s Settings) (StoreOptions, error) {
	o := StoreOptions{DatabaseURL: s.Ctx.String("database-url"), Table: s.Ctx.String("table"),
		LogFormat: s.Ctx.String("log-format")}
	if _, err := lease.ParseTable(o.Table); err != nil {
		return o, Usagef("invalid %s: %v", s.Source("table"), err)
	}
	level, ok := logLevels[s.Ctx.String("log-level")]
	if !ok {
		return o, Usagef("invalid %s %q: use trace, debug, info, warn or error", s.Source("log-level"), s.Ctx.String("log-level"))
	}
	o.LogLevel = level
	switch o.LogFormat {
	case "json", "console", "auto":
	default:
		return o, Usagef("invalid %s %q: use json, console or auto", s.Source("log-format"), o.LogFormat)
	}
	return o, nil
}

// ParseTimings reads the four timings. Those not set follow the TTL
// (lease.TimingsFor, as lease.New does); the result must pass lease's
// safety rule, and a refusal lists every value to change with numbers that
// satisfy it. Each timing is read from its flag (timingFlags).
func ParseTimings(s Settings) (lease.Timings, []string, error) {
	ttl, err := s.Duration(timingFlags[lease.SettingTTL])
	if err != nil {
		return lease.Timings{}, nil, err
	}
	set := map[lease.Setting]time.Duration{}
	var derived []string
	for _, setting := range []lease.Setting{lease.SettingRenewInterval, lease.SettingGrace, lease.SettingRetryInterval} {
		name := timingFlags[setting]
		if !s.Ctx.IsSet(name) {
			derived = append(derived, name)
			continue
		}
		if set[setting], err = s.Duration(name); err != nil {
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
		name := timingFlags[te.Settings[0]]
		if slices.Contains(derived, name) {
			// Said without the value that follows, which is rounded to
			// milliseconds and may read 0s.
			return t, nil, Usagef("invalid %s %s: too short: the --%s that follows from it (%s) %s; use --ttl %s or longer",
				s.Source("ttl"), ttl, name, derivedRatio[te.Settings[0]], derivedFloor[te.Settings[0]], minTTL(ttl, set))
		}
		return t, nil, Usagef("invalid %s %s: %s", s.Source(name), s.Ctx.String(name), te.Msg)
	}
	longer := describeTimings(lease.Timings{TTL: t.MinTTL(), RenewInterval: t.RenewInterval, Grace: t.Grace, RetryInterval: t.RetryInterval}, lease.SettingTTL)
	if te.Fix.Check() != nil {
		// No timings fit a TTL this short: offering its scaled values
		// (rounded, they read 0s) would be a second refusal.
		return t, nil, Usagef("timings do not fit: %s; use %s", te.Msg, longer)
	}
	return t, nil, Usagef("timings do not fit: %s; use %s, or %s", te.Msg, longer,
		describeTimings(te.Fix, lease.SettingRenewInterval, lease.SettingGrace, lease.SettingRetryInterval))
}

// timingFlags names the flag of each timing.
var timingFlags = map[lease.Setting]string{
	lease.SettingTTL: "ttl", lease.SettingRenewInterval: "renew-interval", lease.SettingRetryInterval: "retry-interval",
	lease.SettingGrace: "grace",
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
	lo, hi := ttl.Truncate(time.Millisecond), durationLimits[timingFlags[lease.SettingTTL]].max
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
		parts = append(parts, fmt.Sprintf("--%s %s", timingFlags[setting], setting.Of(t)))
	}
	if settings[0] != lease.SettingTTL {
		parts = append(parts, fmt.Sprintf("(with --ttl %s; or leave them unset to follow it)", t.TTL))
	}
	return strings.Join(parts, " ")
}

// LogTimeFormat is the time of every JSON log line: handoffs take
// milliseconds. zerolog reads it from a package variable, for its console
// writer too, so it is set once, before any logger exists.
const LogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func init() { zerolog.TimeFieldFormat = LogTimeFormat }

// NewLogger builds the logger the settings ask for. Logs go to stderr
// (the app's ErrWriter) through redact, which every log line passes: no
// password gets out. The console format has colours only on a terminal,
// and not when NO_COLOR is set (no-color.org).
func NewLogger(stderr io.Writer, o StoreOptions, secrets *redact.Redactor) zerolog.Logger {
	w := stderr
	f, ok := stderr.(*os.File)
	tty := ok && isatty.IsTerminal(f.Fd())
	if o.LogFormat == "console" || o.LogFormat == "auto" && tty {
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000", NoColor: !tty || os.Getenv("NO_COLOR") != ""}
	}
	out := zerolog.New(secrets.Writer(w)) // JSON, redacted before any formatting
	return out.Level(o.LogLevel).With().Timestamp().Logger()
}

// MaxRetryDelay caps the doubling of --retry-delay.
const MaxRetryDelay = 10 * time.Minute
