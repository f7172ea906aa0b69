// Package trigger is the trigger subcommand: it asks a job's running
// schedulers to run it once now.
package trigger
