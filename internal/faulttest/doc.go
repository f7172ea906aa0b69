// Package faulttest proves leasewrap's exclusion under faults, Jepsen style:
// its tests run several real leasewrap processes on one job, each child
// records when it started and ended on CLOCK_MONOTONIC (shared by all
// processes of a machine), faults are injected for real (signals, a TCP
// proxy per wrapper that cuts, blackholes or slows its database connection,
// a restarted PostgreSQL), and a checker reads the history afterwards: no two
// children overlap, fencing tokens rise, every child ended or is provably
// dead, and a new holder takes the lease within the bound the design
// promises (timed to its take, not to when its child gets to run).
//
// CI runs a few trials per scenario; LEASEWRAP_FAULT_TRIALS=20 runs more.
package faulttest
