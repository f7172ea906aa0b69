// Package migrate is the migrate subcommand: it creates or upgrades the
// lease, history and claims tables.
package migrate
