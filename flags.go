package main

import (
	"errors"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

// storeFlags are the flags of every command that talks to the lease table.
func storeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "database-url", EnvVars: []string{"LEASEWRAP_DATABASE_URL", "DATABASE_URL"},
			Usage: "PostgreSQL URL or key=value string (default: libpq's PG* variables)"},
		&cli.StringFlag{Name: "table", EnvVars: []string{"LEASEWRAP_TABLE"}, Value: lease.DefaultTable,
			Usage: "lease table, may be schema.table"},
		&cli.StringFlag{Name: "log-level", EnvVars: []string{"LEASEWRAP_LOG_LEVEL"}, Value: "info",
			Usage: "trace, debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", EnvVars: []string{"LEASEWRAP_LOG_FORMAT"}, Value: "auto",
			Usage: "json, console, or auto (console on a terminal)"},
	}
}

// runFlags are the flags of the main command.
func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "job", EnvVars: []string{"LEASEWRAP_JOB"},
			Usage: "lease name, 1-200 bytes of UTF-8 (required)"},
		&cli.StringFlag{Name: "id", EnvVars: []string{"LEASEWRAP_ID"},
			Usage: "this instance's holder id (default: <hostname>-<pid>-<random>)"},
		&cli.DurationFlag{Name: "ttl", EnvVars: []string{"LEASEWRAP_TTL"}, Value: lease.DefaultTTL,
			Usage: "lease duration written to the database"},
		&cli.DurationFlag{Name: "renew-interval", EnvVars: []string{"LEASEWRAP_RENEW_INTERVAL"}, Value: lease.DefaultRenewInterval,
			Usage: "how often the leader renews"},
		&cli.DurationFlag{Name: "grace", EnvVars: []string{"LEASEWRAP_GRACE"}, Value: lease.DefaultGrace,
			Usage: "SIGTERM to SIGKILL delay"},
		&cli.BoolFlag{Name: "wait", EnvVars: []string{"LEASEWRAP_WAIT"},
			Usage: "stand by until leader instead of skipping"},
		&cli.DurationFlag{Name: "wait-timeout", EnvVars: []string{"LEASEWRAP_WAIT_TIMEOUT"},
			Usage: "give up standing by after this long and exit 124 (0: never)"},
		&cli.BoolFlag{Name: "listen", EnvVars: []string{"LEASEWRAP_LISTEN"}, Value: true,
			Usage: "wake standbys the moment the lease is released (LISTEN/NOTIFY); --listen=false only polls"},
		&cli.DurationFlag{Name: "retry-interval", EnvVars: []string{"LEASEWRAP_RETRY_INTERVAL"}, Value: lease.DefaultRetryInterval,
			Usage: "standby poll and renewal retry period"},
		&cli.DurationFlag{Name: "hold-for", EnvVars: []string{"LEASEWRAP_HOLD_FOR"},
			Usage: "keep the lease at least this long after acquiring, even once the command has exited"},
		&cli.IntFlag{Name: "skip-exit-code", EnvVars: []string{"LEASEWRAP_SKIP_EXIT_CODE"},
			Usage: "exit status when another instance holds the lease"},
		&cli.StringFlag{Name: "http-addr", EnvVars: []string{"LEASEWRAP_HTTP_ADDR"},
			Usage: "serve /healthz, /leader and /metrics on this address, as in :8080 (default: off)"},
	}, storeFlags()...)
}

// newLogger builds the logger the flags ask for; logs go to stderr.
func newLogger(c *cli.Context) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.String("log-level"))
	if err != nil || c.String("log-level") == "" {
		return zerolog.Logger{}, usagef("invalid --log-level %q: use trace, debug, info, warn or error", c.String("log-level"))
	}
	var out = zerolog.New(os.Stderr)
	switch format := c.String("log-format"); format {
	case "json":
	case "console", "auto":
		if format == "console" || isatty.IsTerminal(os.Stderr.Fd()) {
			out = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"})
		}
	default:
		return zerolog.Logger{}, usagef("invalid --log-format %q: use json, console or auto", format)
	}
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000000Z07:00" // handoffs take milliseconds
	return out.Level(level).With().Timestamp().Logger(), nil
}

// timingFlags names the flag behind each field of a lease.TimingError.
var timingFlags = map[string]string{
	"TTL": "--ttl", "RenewInterval": "--renew-interval", "RetryInterval": "--retry-interval", "Grace": "--grace",
}

// checkTimings validates the lease timings in the flags' own terms.
func checkTimings(c *cli.Context) error {
	ttl, renew, retry, grace := c.Duration("ttl"), c.Duration("renew-interval"), c.Duration("retry-interval"), c.Duration("grace")
	err := lease.CheckTimings(ttl, renew, retry, grace)
	var te *lease.TimingError
	if errors.As(err, &te) {
		if te.Field == "TTL" && te.Value > 0 && renew > 0 && grace > 0 {
			return usagef("--ttl %s is too short: --renew-interval (%s) plus --grace (%s) must stay under 95%% of it; use --ttl %s or shorten the others",
				ttl, renew, grace, lease.SuggestTTL(renew, grace))
		}
		return usagef("invalid %s %s: %s", timingFlags[te.Field], te.Value, te.Msg)
	}
	for _, name := range []string{"wait-timeout", "hold-for"} {
		if d := c.Duration(name); d < 0 {
			return usagef("invalid --%s %s: must be 0 or positive, as in --%s 5m", name, d, name)
		}
	}
	return nil
}
