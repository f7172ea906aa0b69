package exporter

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"

	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/web"
)

// defaultExporterAddr is where the exporter listens unless told. 9187 is
// also postgres_exporter's default: on a host running both, set one.
const defaultExporterAddr = ":9187"

// Command is the exporter subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "exporter",
		Usage:     "serve Prometheus metrics and a web page on every job's lease and runs, read from the tables at each request",
		UsageText: "leasewrap exporter [--http-addr ADDR] [--web.config.file FILE] [--web.show-output] [flags]",
		Description: "One process for the whole fleet. It only reads the lease table and its history\n" +
			"(SELECT on both is all its role needs) and reports facts: when each job last\n" +
			"succeeded and last ran, how, who holds it now. Alert rules decide what is stale.\n" +
			"A database that does not answer is reported as leasewrap_exporter_up 0.\n" +
			"The same address serves a read-only web page: / lists the jobs, /jobs/NAME draws\n" +
			"one job's runs by holder over time. Without --web.config.file it is plain HTTP\n" +
			"with no authentication; the output runs kept is shown only with --web.show-output.",
		// Not LEASEWRAP_HTTP_ADDR: a wrapper on the same host reads that
		// one, and the two would try the same port.
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "http-addr", EnvVars: []string{"LEASEWRAP_EXPORTER_ADDR"}, Value: defaultExporterAddr,
				Usage: "serve /, /jobs/NAME, /metrics, /livez, /readyz and /healthz on this address"},
			&cli.StringFlag{Name: "web.config.file", EnvVars: []string{"LEASEWRAP_WEB_CONFIG_FILE"},
				Usage: "TLS and basic auth for the listener, in the Prometheus exporters' web configuration format; without it the listener is plain HTTP with no authentication"},
			&cli.BoolFlag{Name: "web.show-output", EnvVars: []string{"LEASEWRAP_WEB_SHOW_OUTPUT"},
				Usage: "show on the web page the output runs kept (--keep-output), which may hold secrets; hidden by default"},
		}, cmdutil.StoreFlags()...),
		OnUsageError: cmdutil.UsageError,
		Action:       exporterAction,
	}
}

func exporterAction(c *cli.Context) error {
	s := cmdutil.NewSettings(c)
	addr := c.String("http-addr")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return cmdutil.Usagef("invalid %s %q: want [host]:port, as in %s", s.Source("http-addr"), addr, defaultExporterAddr)
	}
	// The file is read again at each connection (the exporter toolkit's
	// way, so that certificates can be rotated): checked once here, so that
	// a mistake stops the start rather than every request.
	webConfig := c.String("web.config.file")
	if err := toolkit.Validate(webConfig); err != nil {
		return cmdutil.Usagef("invalid %s %q: %v (see https://prometheus.io/docs/prometheus/latest/configuration/https/)",
			s.Source("web.config.file"), webConfig, err)
	}
	a, err := cmdutil.OpenAdmin(c)
	if err != nil {
		return err
	}
	defer a.DB.Close()
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	if err := leaseTableThere(ctx, a.Read); err != nil {
		return err
	}

	exp := monitor.NewExporter(ctx, a.Read, monitor.DefaultScrapeTimeout, a.Log)
	exp.RedactWith(a.DB.Redact.Wrap)
	mux := http.NewServeMux()
	metrics := exp.Handler()
	for _, path := range []string{"/metrics", "/livez", "/readyz", "/healthz"} {
		mux.Handle(path, metrics)
	}
	mux.Handle("/", web.New(a.Read, a.Log, web.WithOutput(c.Bool("web.show-output"))).Handler())
	stop, bound, err := monitor.ServeWith(addr, mux, webServe(webConfig, a.Log))
	if err != nil {
		return cmdutil.Usagef("cannot serve %s %q: %v", s.Source("http-addr"), addr, err)
	}
	defer stop()
	a.Log.Info().Str("http_addr", bound.String()).Str("table", a.Opts.Table).Bool("web_config", webConfig != "").
		Bool("web_show_output", c.Bool("web.show-output")).
		Msg("serving the web page, /metrics and /healthz")
	// The database need not answer now: the exporter starts anyway and
	// says leasewrap_exporter_up 0 until it does, so that an outage shows
	// as such rather than as a missing target.
	if jobs, err := exp.Probe(); err == nil {
		a.Log.Info().Int("jobs", jobs).Msg("database answers")
	}
	<-ctx.Done()
	a.Log.Info().Msg("stopping")
	return nil
}

// leaseTableThere refuses to start, with EX_UNAVAILABLE, an exporter whose
// lease table does not exist: a mistyped --table would otherwise serve
// leasewrap_exporter_up 0 for ever, looking like an outage. A database that
// does not answer is not refused: the exporter serves, and says up 0 until
// it does.
func leaseTableThere(ctx context.Context, read *inspect.Reader) error {
	ctx, cancel := context.WithTimeout(ctx, monitor.DefaultScrapeTimeout)
	defer cancel()
	if _, err := read.Status(ctx, ""); errors.Is(err, inspect.ErrNoTable) {
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: err}
	}
	return nil
}

// webServe serves a listener as the exporter toolkit does: TLS and basic
// auth as configFile says, plain HTTP without one.
func webServe(configFile string, log zerolog.Logger) func(*http.Server, net.Listener) error {
	logger := slog.New(zerolog.NewSlogHandler(log))
	flags := &toolkit.FlagConfig{WebConfigFile: &configFile}
	return func(srv *http.Server, ln net.Listener) error {
		err := toolkit.Serve(ln, srv, flags, logger)
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Str("error", err.Error()).Msg("cannot serve")
		}
		return err
	}
}
