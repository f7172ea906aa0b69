// Package command is the leasewrap command line: the main command that
// wraps a child under the lease (or runs it on a schedule), and the
// operator's subcommands (status, history, check, release, pause, resume,
// trigger, reschedule, migrate, exporter, version). Run is its entry point;
// package main only calls it.
package command
