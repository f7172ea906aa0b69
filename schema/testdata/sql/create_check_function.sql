CREATE OR REPLACE FUNCTION "leasewrap_check"(job text, token bigint, lease_table text DEFAULT 'leader_lease')
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  current_token bigint;
  live boolean;
BEGIN
  EXECUTE format('SELECT fencing_token, expires_at > clock_timestamp() FROM %s WHERE job_name = $1 FOR KEY SHARE',
                 lease_table::regclass)
    INTO current_token, live USING job;
  IF current_token IS NULL THEN
    RAISE EXCEPTION 'leasewrap: no lease for job %', job USING ERRCODE = 'LW001';
  ELSIF current_token <> token THEN
    RAISE EXCEPTION 'leasewrap: fencing token % of job % is stale, the current one is %', token, job, current_token
      USING ERRCODE = 'LW001';
  ELSIF NOT live THEN
    RAISE EXCEPTION 'leasewrap: the lease on job % has expired', job USING ERRCODE = 'LW001';
  END IF;
END
$fn$