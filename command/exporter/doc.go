// Package exporter is the exporter subcommand: the Prometheus metrics of
// every job, /livez, /readyz, /healthz and the web page, served from the
// tables.
package exporter
