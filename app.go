package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/runner"
)

// run builds the CLI, runs it on args and returns the exit status. The
// child's command line is split off at the first "--" before urfave/cli sees
// the rest, so that a child named "status" or "version" is never taken for a
// subcommand.
func run(args []string, stderr io.Writer) int {
	own, child, hasChild := splitChild(args)
	app := newApp(child, hasChild)
	app.ErrWriter = stderr
	err := app.Run(own)
	var exit *runner.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.Err != nil {
			fmt.Fprintf(stderr, "leasewrap: %v\n", exit.Err)
		}
		return exit.Code
	default:
		// Everything else comes from parsing flags and arguments.
		fmt.Fprintf(stderr, "leasewrap: %v\n", err)
		return runner.ExitUsage
	}
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

const description = `Runs COMMAND only while this instance holds the lease on --job in
PostgreSQL; the others skip (exit --skip-exit-code) or stand by (--wait).
If the lease cannot be renewed, COMMAND gets SIGTERM before the lease could
expire, SIGKILL --grace later, and leasewrap exits 75.`

func newApp(child []string, hasChild bool) *cli.App {
	return &cli.App{
		Name:            "leasewrap",
		Usage:           "run a command on exactly one of N instances, coordinated by a PostgreSQL lease",
		UsageText:       "leasewrap [flags] -- COMMAND [ARG...]\nleasewrap status|release|migrate|version [flags]",
		Description:     description,
		Version:         version(),
		HideVersion:     true,
		Flags:           runFlags(),
		Action:          func(c *cli.Context) error { return runAction(c, child, hasChild) },
		Commands:        []*cli.Command{statusCommand(), releaseCommand(), migrateCommand(), versionCommand()},
		OnUsageError:    usageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // main alone exits
		HideHelpCommand: true,
	}
}

// usageError keeps urfave/cli from printing the whole help for a bad flag:
// one line says what was wrong.
func usageError(_ *cli.Context, err error, _ bool) error {
	return &runner.ExitError{Code: runner.ExitUsage, Err: fmt.Errorf("%v (see leasewrap --help)", err)}
}

// usagef returns an EX_USAGE error with a one-line message.
func usagef(format string, a ...any) error {
	return &runner.ExitError{Code: runner.ExitUsage, Err: fmt.Errorf(format, a...)}
}
