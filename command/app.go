package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/redbite/leasewrap/command/check"
	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/exporter"
	"github.com/redbite/leasewrap/command/history"
	"github.com/redbite/leasewrap/command/migrate"
	"github.com/redbite/leasewrap/command/pause"
	"github.com/redbite/leasewrap/command/release"
	"github.com/redbite/leasewrap/command/reschedule"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/command/trigger"
	"github.com/redbite/leasewrap/command/version"
	"github.com/redbite/leasewrap/command/wrap"
	"github.com/urfave/cli/v2"
)

// Run parses args (os.Args), runs what they ask for and returns the exit
// status for os.Exit.
//
// The child's command line is split off at the first "--" before urfave/cli
// sees the rest, so that a child named "status" is never taken for a
// subcommand. A subcommand's name may come after flags; those flags are
// moved behind it, so that every flag means the same wherever it is written
// (urfave/cli would otherwise parse them as the main command's and the
// subcommand would use its defaults).
//
// As in git: leasewrap alone prints its usage to stderr and exits 64;
// "leasewrap help [SUBCOMMAND]" is --help, and --version is the version
// subcommand. A word before "--" that is no subcommand is refused as an
// unknown command (with the subcommand it is likely a typo of), unless no
// "--" follows and it names a program (a path, or one found in $PATH):
// "leasewrap --job x ./report" runs ./report, as it always did.
func Run(args []string, stdout, stderr io.Writer) int {
	own, child, hasChild := splitChild(args)
	app := NewApp(stdout, stderr)
	if len(own) <= 1 && !hasChild {
		printUsage(stderr, app.Commands)
		return cmdutil.ExitUsage
	}
	own, err := helpAndVersion(own, app.Commands)
	if err != nil {
		return cmdutil.Report(stderr, err)
	}
	own, sub := subcommandFirst(own, app.Commands)
	app.Metadata = map[string]any{cmdutil.ArgsKey: own}
	switch {
	case sub != nil && hasChild:
		return cmdutil.Report(stderr, cmdutil.Usagef("%s runs no command: remove the -- and what follows it (%q)", sub.Name, child))
	case sub != nil:
		// Only the main command reads the run settings: a bad LEASEWRAP_TTL
		// must not break status or version.
		app.Flags = nil
	default:
		if err := unknownCommand(own, app.Commands, hasChild); err != nil {
			return cmdutil.Report(stderr, err)
		}
		app.Action = cmdutil.WithStatus(func(c *cli.Context) error { return wrap.Action(c, child, hasChild) })
	}
	return cmdutil.Report(stderr, app.Run(own))
}

// printUsage is what leasewrap alone prints, to stderr, before it exits
// 64: how it is used, and where to read more.
func printUsage(w io.Writer, cmds []*cli.Command) {
	fmt.Fprintf(w, "usage: leasewrap [flags] -- COMMAND [ARG...]\n       leasewrap %s [flags]\n\n"+
		"Runs COMMAND only while this instance holds the lease on --job in PostgreSQL.\n"+
		"See leasewrap --help for the flags, leasewrap help SUBCOMMAND for a subcommand's.\n",
		subcommandList(cmds))
}

// subcommandList names the subcommands as usage lines do: status|history|...
func subcommandList(cmds []*cli.Command) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name
	}
	return strings.Join(names, "|")
}

// NewApp describes the whole command line: the main command's flags and
// every subcommand.
func NewApp(stdout, stderr io.Writer) *cli.App {
	cmds := commands()
	return &cli.App{
		Name:            "leasewrap",
		Usage:           "run a command on exactly one of N instances, coordinated by a PostgreSQL lease",
		UsageText:       "leasewrap [flags] -- COMMAND [ARG...]\nleasewrap " + subcommandList(cmds) + " [flags]\nleasewrap help [SUBCOMMAND]",
		Description:     description,
		Version:         version.String(),
		HideVersion:     true,
		Flags:           wrap.RunFlags(),
		Commands:        cmds,
		OnUsageError:    cmdutil.UsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // run alone decides the status
		HideHelpCommand: true,
		Writer:          stdout,
		ErrWriter:       stderr,
	}
}

func commands() []*cli.Command {
	cmds := []*cli.Command{status.Command(), history.Command(), check.Command(), exporter.Command(), release.Command(), trigger.Command(), pause.Command(), pause.ResumeCommand(), reschedule.Command(), migrate.Command(), version.Command()}
	for _, c := range cmds {
		c.Action = cmdutil.WithStatus(c.Action)
	}
	return cmds
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
