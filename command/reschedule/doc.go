// Package reschedule is the reschedule subcommand: an operator accepts a
// changed schedule for a job.
package reschedule
