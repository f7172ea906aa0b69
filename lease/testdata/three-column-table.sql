-- The minimal lease table that blog posts on PostgreSQL leases show, and
-- that leasewrap upgrades in place: holder and expires_at may be NULL and
-- there is no fencing token. Tests replace the name in
-- double braces with a quoted identifier.
CREATE TABLE {{table}} (
  job_name text PRIMARY KEY,
  holder text,
  expires_at timestamptz
);
