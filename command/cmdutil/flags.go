package cmdutil

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

// Each setting is declared once here, with its flag name and environment
// variables; commands pick the ones they read. Durations and numbers are
// read as text and parsed by the options code, which can then say whether a
// bad value came from the flag or from the environment.

// JobFlag is --job (LEASEWRAP_JOB), with a subcommand's usage text.
func JobFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "job", EnvVars: []string{"LEASEWRAP_JOB"}, Usage: usage}
}

// IDFlag is --id (LEASEWRAP_ID), with a subcommand's usage text.
func IDFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "id", EnvVars: []string{"LEASEWRAP_ID"}, Usage: usage}
}

// JSONFlag asks a subcommand for JSON instead of a table or a line.
func JSONFlag(usage string) cli.Flag { return &cli.BoolFlag{Name: "json", Usage: usage} }

// StoreFlags are the settings of every command that talks to the lease table.
func StoreFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "database-url", EnvVars: []string{"LEASEWRAP_DATABASE_URL", "DATABASE_URL"},
			Usage: "PostgreSQL URL or key=value string; needed unless PGHOST, PGDATABASE or PGSERVICE names the database; prefer the environment or ~/.pgpass for passwords"},
		&cli.StringFlag{Name: "table", EnvVars: []string{"LEASEWRAP_TABLE"}, Value: lease.DefaultTable,
			Usage: "lease table, may be schema.table"},
		&cli.StringFlag{Name: "log-level", EnvVars: []string{"LEASEWRAP_LOG_LEVEL"}, Value: "info",
			Usage: "trace, debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", EnvVars: []string{"LEASEWRAP_LOG_FORMAT"}, Value: "auto",
			Usage: "json, console, or auto (console on a terminal)"},
	}
}

// ShortDuration writes d as a flag's default is read: 720h, not
// 720h0m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// FlagName returns the name of a command-line flag ("--ttl=3s" gives
// "ttl"), and whether arg is one.
func FlagName(arg string) (name string, hasValue, ok bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", false, false
	}
	name = strings.TrimLeft(arg, "-")
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue, name != ""
}

// fromCommandLine reports whether args set flag name (in any of the forms
// the flag package accepts).
func fromCommandLine(args []string, name string) bool {
	for _, a := range args {
		if n, _, ok := FlagName(a); ok && n == name {
			return true
		}
	}
	return false
}
