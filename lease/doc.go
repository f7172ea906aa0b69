// Package lease keeps leases on named jobs in a PostgreSQL table, so that
// exactly one of several processes does a job at a time, with nothing but
// the database they already share.
//
// A lease is one row per job. Acquiring, renewing and releasing it are single
// statements whose times all come from the database clock; a lease is live
// while expires_at > now(). Each acquisition raises the row's fencing token
// by one, so work can carry the token and a store can reject writes made under
// an older one. Releasing expires the row in place and never deletes it.
//
// The holder also keeps a local deadline on a clock that counts suspended
// time (CLOCK_BOOTTIME on Linux), started before each successful statement
// was sent, so it is never later than the database's expiry. Lease.Done is
// closed the grace plus a safety margin before that deadline unless a renewal
// succeeded, or at once when a renewal finds the lease taken over: that is
// the moment leadership can no longer be guaranteed, and work must stop.
//
// The table is created, or upgraded from the three-column shape
// (job_name, holder, expires_at), on first use. The catalog is read first and
// DDL runs only when something is missing, under an advisory lock so that
// many instances starting at once on an empty database do not collide.
package lease
