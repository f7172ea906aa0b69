// Package version is the version subcommand and the version it prints.
package version
