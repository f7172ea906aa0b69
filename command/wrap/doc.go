// Package wrap is leasewrap's main command: it holds the lease on a job and
// runs the command under it, once (with its retries, pings and kept output)
// or on a schedule, under the loop of package scheduler.
package wrap
