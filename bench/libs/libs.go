// Package libs links every library leasewrap links, and nothing of its
// own: what their packages initialise before main is the start-up any
// program built on them pays. bench/empty and bench/floor import it when
// built with the samelibs tag, so that `leasewrap version` and a wrapped
// `true` are measured against programs that start the same libraries.
package libs

import (
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-isatty"
	_ "github.com/netresearch/go-cron"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/collectors"
	_ "github.com/prometheus/client_golang/prometheus/promauto"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/exporter-toolkit/web"
	_ "github.com/rs/zerolog"
	_ "github.com/urfave/cli/v2"
	_ "golang.org/x/sys/unix"
)
