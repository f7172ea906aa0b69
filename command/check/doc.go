// Package check is the check subcommand: a monitoring check (Nagios exit
// statuses) of one job's last success, or of its latest scheduled time.
package check
