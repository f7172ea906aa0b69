package main

import (
	"fmt"
	"io"
	"regexp"

	"github.com/urfave/cli/v2"
)

// run parses args, runs what they ask for and returns the exit status.
//
// The child's command line is split off at the first "--" before urfave/cli
// sees the rest, so that a child named "status" is never taken for a
// subcommand. A subcommand's name may come after flags; those flags are
// moved behind it, so that every flag means the same wherever it is written
// (urfave/cli would otherwise parse them as the main command's and the
// subcommand would use its defaults).
func run(args []string, stdout, stderr io.Writer) int {
	own, child, hasChild := splitChild(args)
	app := newApp(stdout, stderr)
	own, sub := subcommandFirst(own, app.Commands)
	app.Metadata = map[string]any{argsKey: own}
	switch {
	case sub != nil && hasChild:
		return report(stderr, usagef("%s runs no command: remove the -- and what follows it (%q)", sub.Name, child))
	case sub != nil:
		// Only the main command reads the run settings: a bad LEASEWRAP_TTL
		// must not break status or version.
		app.Flags = nil
	default:
		app.Action = withStatus(func(c *cli.Context) error { return runAction(c, child, hasChild) })
	}
	return report(stderr, app.Run(own))
}

// newApp describes the whole command line: the main command's flags and
// every subcommand.
func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:            "leasewrap",
		Usage:           "run a command on exactly one of N instances, coordinated by a PostgreSQL lease",
		UsageText:       "leasewrap [flags] -- COMMAND [ARG...]\nleasewrap status|history|check|exporter|release|trigger|migrate|version [flags]",
		Description:     description,
		Version:         version(),
		HideVersion:     true,
		Flags:           runFlags(),
		Commands:        commands(),
		OnUsageError:    usageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // run alone decides the status
		HideHelpCommand: true,
		Writer:          stdout,
		ErrWriter:       stderr,
	}
}

// report prints err's one line, if it has one, and returns its exit status.
func report(stderr io.Writer, err error) int {
	code, msg := exitCode(err)
	if msg != nil {
		fmt.Fprintf(stderr, "leasewrap: %v\n", msg)
	}
	return code
}

func commands() []*cli.Command {
	cmds := []*cli.Command{statusCommand(), historyCommand(), checkCommand(), exporterCommand(), releaseCommand(), triggerCommand(), pauseCommand(), resumeCommand(), rescheduleCommand(), migrateCommand(), versionCommand()}
	for _, c := range cmds {
		c.Action = withStatus(c.Action)
	}
	return cmds
}

// splitChild splits args at the first "--": leasewrap's own arguments before
// it, the child's command line after it.
func splitChild(args []string) (own, child []string, found bool) {
	for i, a := range args {
		if i > 0 && a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}

// subcommandFirst finds the subcommand named among args (the first word that
// is not a flag or a flag's value) and moves it in front of every flag. It
// returns args unchanged, and nil, when there is none.
func subcommandFirst(args []string, cmds []*cli.Command) ([]string, *cli.Command) {
	bools := boolFlags(cmds)
	for i := 1; i < len(args); i++ {
		name, hasValue, isFlag := flagName(args[i])
		if isFlag {
			if !hasValue && !bools[name] {
				i++ // the flag's value
			}
			continue
		}
		for _, c := range cmds {
			if c.HasName(args[i]) {
				reordered := append([]string{args[0], args[i]}, args[1:i]...)
				return append(reordered, args[i+1:]...), c
			}
		}
		return args, nil
	}
	return args, nil
}

const description = `Runs COMMAND only while this instance holds the lease on --job in
PostgreSQL; the others skip (exit --skip-exit-code) or stand by (--wait).
If the lease cannot be renewed, COMMAND gets SIGTERM before the lease could
expire, SIGKILL --grace later, and leasewrap exits 75.

Timings: --renew-interval, --grace and --retry-interval follow --ttl unless
set (ttl/3, ttl*2/9 and ttl*2/45: 15s, 10s and 2s at the default 45s). Their
sum plus 5% of the TTL must stay under the TTL. Durations need a unit: 30s,
2m, 500ms.

Ready-made sets:
  fast failover (about 10s):  --ttl 10s
  default:                    --ttl 45s
  gentle on the database:     --ttl 3m`

// usageError keeps urfave/cli from printing the whole help for a bad flag:
// one line says what was wrong.
func usageError(c *cli.Context, err error, _ bool) error {
	name := "leasewrap"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name += " " + c.Command.Name
	}
	return usagef("%s (see %s --help)", flagError(err.Error()), name)
}

// urfave/cli's words for a flag it does not know or a boolean it cannot
// read, which name the flag with one dash and pass on strconv's.
var (
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)
	badBool     = regexp.MustCompile(`^invalid boolean value "(.*)" for -+(\S+): parse error$`)
	badEnvBool  = regexp.MustCompile(`^could not parse "(.*)" as bool value from environment variable "(\S+)" for flag (\S+): `)
)

// flagError says msg, urfave/cli's error, as leasewrap's other settings
// errors do: the flag as written, with two dashes, and what is valid. Any
// other message is left as it is.
func flagError(msg string) string {
	const bools = "want true or false (or 1, 0, t, f)"
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		return "unknown flag --" + m[1]
	}
	if m := badBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid --%s %q: %s", m[2], m[1], bools)
	}
	if m := badEnvBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid %s (--%s) %q: %s", m[2], m[3], m[1], bools)
	}
	return msg
}

// noArgs refuses arguments a subcommand does not take.
func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("%s takes no arguments, got %q", c.Command.Name, c.Args().First())
	}
	return nil
}
