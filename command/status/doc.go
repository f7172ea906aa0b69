// Package status is the status subcommand: every job's lease and last run,
// as a table or JSON.
package status
