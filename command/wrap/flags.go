package wrap

import (
	"strings"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
	"github.com/urfave/cli/v2"
)

// RunFlags are the settings of the main command.
func RunFlags() []cli.Flag {
	return append([]cli.Flag{
		cmdutil.JobFlag("lease name, 1-200 bytes of printable UTF-8 without '#', not . or .. (required)"),
		cmdutil.IDFlag("this instance's holder id, 1-200 bytes of printable UTF-8 (default: <hostname>-<pid>-<random>)"),
		&cli.StringFlag{Name: "ttl", EnvVars: []string{"LEASEWRAP_TTL"}, Value: lease.DefaultTTL.String(),
			Usage: "lease duration written to the database, at most 24h; the three timings below follow it unless set"},
		&cli.StringFlag{Name: "renew-interval", EnvVars: []string{"LEASEWRAP_RENEW_INTERVAL"},
			DefaultText: "ttl/3, 15s", Usage: "how often the leader renews"},
		&cli.StringFlag{Name: "grace", EnvVars: []string{"LEASEWRAP_GRACE"},
			DefaultText: "ttl*2/9, 10s", Usage: "SIGTERM to SIGKILL delay"},
		&cli.StringFlag{Name: "retry-interval", EnvVars: []string{"LEASEWRAP_RETRY_INTERVAL"},
			DefaultText: "ttl*2/45, 2s", Usage: "standby poll and renewal retry period"},
		&cli.BoolFlag{Name: "wait", EnvVars: []string{"LEASEWRAP_WAIT"},
			Usage: "stand by until leader instead of skipping"},
		&cli.StringFlag{Name: "priority", EnvVars: []string{"LEASEWRAP_PRIORITY"}, Value: "0",
			Usage: "with --wait: a release hands the lease to the standby with the highest priority, among equals to the one waiting longest"},
		&cli.StringFlag{Name: "wait-timeout", EnvVars: []string{"LEASEWRAP_WAIT_TIMEOUT"}, Value: "0s",
			Usage: "give up standing by (--wait, or a scheduler for its database at its start) after this long and exit 124 (0s: never)"},
		&cli.BoolFlag{Name: "listen", EnvVars: []string{"LEASEWRAP_LISTEN"}, Value: true,
			Usage: "wake standbys the moment the lease is released, schedulers on a trigger and a holder on a release (LISTEN/NOTIFY); --listen=false only polls"},
		&cli.StringFlag{Name: "hold-for", EnvVars: []string{"LEASEWRAP_HOLD_FOR"}, Value: "0s",
			Usage: "keep the lease at least this long after acquiring, even once the command has exited"},
		&cli.StringFlag{Name: "skip-exit-code", EnvVars: []string{"LEASEWRAP_SKIP_EXIT_CODE"}, Value: "0",
			Usage: "exit status when another instance holds the lease"},
		&cli.StringFlag{Name: "max-runtime", EnvVars: []string{"LEASEWRAP_MAX_RUNTIME"}, Value: "0s",
			Usage: "stop the command (SIGTERM, SIGKILL --grace later) once it ran this long, and exit 124 (0s: no limit)"},
		&cli.StringFlag{Name: "retries", EnvVars: []string{"LEASEWRAP_RETRIES"}, Value: "0",
			Usage: "run a failed command again up to this many times, keeping the lease in between"},
		&cli.StringFlag{Name: "retry-delay", EnvVars: []string{"LEASEWRAP_RETRY_DELAY"}, Value: "10s",
			Usage: "wait before the first retry, doubled for each next one (at most 10m)"},
		&cli.StringFlag{Name: "slots", EnvVars: []string{"LEASEWRAP_SLOTS"}, Value: "1",
			Usage: "let up to N instances run the command at once, each in a slot of its own with its own lease (every instance of a job must use the same N)"},
		&cli.BoolFlag{Name: "require-replicated", EnvVars: []string{"LEASEWRAP_REQUIRE_REPLICATED"},
			Usage: "count a take or renewal only once every streaming standby has replayed it, so that no failover, even to an asynchronous standby, can lose it; with no standby streaming, refuse to start the command (needs pg_monitor)"},
		&cli.StringFlag{Name: "history-keep", EnvVars: []string{"LEASEWRAP_HISTORY_KEEP"}, Value: cmdutil.ShortDuration(lease.DefaultHistoryKeep),
			Usage: "keep finished runs in the history table this long (0s: for ever)"},
		&cli.StringFlag{Name: "keep-output", EnvVars: []string{"LEASEWRAP_KEEP_OUTPUT"}, Value: "0",
			Usage: "keep the last SIZE bytes of the command's stdout and stderr with its run in the history, for history --output (bytes, KiB or MiB, as in 64KiB; at most 1MiB; 0: off); the command's stdout and stderr are then pipes"},
		&cli.StringFlag{Name: "ping-url", EnvVars: []string{"LEASEWRAP_PING_URL"},
			Usage: "ping a monitor when the command starts and ends (healthchecks.io and its self-hosted server, or a cronitor.link URL); only the instance that runs it pings, and a ping never delays it"},
		&cli.BoolFlag{Name: "ping-output", EnvVars: []string{"LEASEWRAP_PING_OUTPUT"},
			Usage: "send the last 10000 bytes of the command's stderr (with --keep-output, of its stdout and stderr) with the final ping (its stderr then becomes a pipe)"},
		&cli.StringFlag{Name: "ping-protocol", EnvVars: []string{"LEASEWRAP_PING_PROTOCOL"}, Value: "auto",
			Usage: "auto, healthchecks or cronitor (auto: cronitor for cronitor.link, else healthchecks)"},
		&cli.StringFlag{Name: "http-addr", EnvVars: []string{"LEASEWRAP_HTTP_ADDR"},
			Usage: "serve /livez, /readyz (and /healthz), /leader and /metrics on this address, as in :8080 (default: off)"},
	}, append(ScheduleFlags(), cmdutil.StoreFlags()...)...)
}

// ScheduleFlags are the settings of a job run on a schedule.
func ScheduleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "schedule", EnvVars: []string{"LEASEWRAP_SCHEDULE"},
			Usage: "run the command at each time of this schedule, on exactly one instance, and never exit by itself: five cron fields, @hourly, @daily, ... or \"@every D\" (counted from the Unix epoch)"},
		&cli.StringFlag{Name: "timezone", EnvVars: []string{"LEASEWRAP_TIMEZONE"},
			Usage: "IANA time zone the schedule is read in, as in Europe/Berlin (default: UTC, or CRON_TZ= in the schedule)"},
		&cli.StringFlag{Name: "catch-up", EnvVars: []string{"LEASEWRAP_CATCH_UP"}, Value: string(schedule.DefaultPolicy),
			Usage: "times nobody ran on time (all instances down): none runs none, latest the most recent once, all each in order; the others are recorded missed"},
		&cli.StringFlag{Name: "catch-up-window", EnvVars: []string{"LEASEWRAP_CATCH_UP_WINDOW"}, Value: cmdutil.ShortDuration(schedule.DefaultWindow),
			Usage: "how late a time may still be caught up"},
		&cli.BoolFlag{Name: "once", EnvVars: []string{"LEASEWRAP_ONCE"},
			Usage: "with --schedule: run the time just due, unless an instance ran it, then exit (for crontab lines): the latest time when less than a minute late, else the next when due within 5s, each at most half the period; older times are recorded missed. A cron spec needs --timezone (or CRON_TZ=) unless this host's zone is UTC"},
	}
}

// configEnv lists every environment variable leasewrap reads its own
// settings from (DATABASE_URL excepted: it is the child's too).
func configEnv() []string {
	var names []string
	for _, f := range RunFlags() {
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, name := range ev.GetEnvVars() {
				if strings.HasPrefix(name, "LEASEWRAP_") {
					names = append(names, name)
				}
			}
		}
	}
	return names
}
