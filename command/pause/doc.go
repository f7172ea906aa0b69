// Package pause is the pause and resume subcommands: an operator stops a
// job's runs and starts them again.
package pause
