// Package lease keeps leases on named jobs in a PostgreSQL table, so that
// exactly one of several processes does a job at a time, with nothing but
// the database they already share.
//
// A lease is one row per job (one per slot with WithSlots). Acquiring,
// renewing and releasing it are single statements whose times all come from
// the database clock; a lease is live while expires_at > now(). Each
// acquisition sets the row's fencing token to more than the one before and
// at least the database clock in microseconds, so a token never repeats,
// even after the row was deleted or lost in a failover: work can carry the
// token and a store can reject writes made under an older one. Releasing
// expires the row in place and never deletes it; each run is recorded in a
// history table next to the lease table, in the same statement.
//
// The holder also keeps a local deadline on a clock that counts suspended
// time (CLOCK_BOOTTIME on Linux), started before each successful statement
// was sent, so it is never later than the database's expiry. Lease.Done is
// closed the grace plus a safety margin before that deadline unless a renewal
// succeeded, or at once when a renewal finds the lease taken over: that is
// the moment leadership can no longer be guaranteed, and work must stop.
//
// The table is created, or upgraded from the three-column shape
// (job_name, holder, expires_at), on first use; any other table is refused
// with a *SchemaError, nothing altered. The first acquisition checks the
// table's shape in the same round trip as the take; only when that fails is
// the catalog read and DDL run, under an advisory lock so that many
// instances starting at once on an empty database do not collide.
//
// This package is the protocol: take, keep, release, standby, slots,
// timings. The tables' contract (their columns, the checks and the
// migrations) is package schema; the questions an operator asks
// (status, history, freshness, metrics) are answered by package
// inspect, which only reads and needs no Store.
package lease
