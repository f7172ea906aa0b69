-- The lease table from the article leasewrap grew out of, exactly as it
-- declares it: holder and expires_at may be NULL and there is no fencing
-- token. leasewrap upgrades this shape in place. Tests replace the name in
-- double braces with a quoted identifier.
CREATE TABLE {{table}} (
  job_name text PRIMARY KEY,
  holder text,
  expires_at timestamptz
);
