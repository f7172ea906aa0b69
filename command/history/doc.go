// Package history is the history subcommand: the runs of the jobs as a
// table, JSON, a timeline, or one run's kept output.
package history
