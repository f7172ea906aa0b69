CREATE OR REPLACE FUNCTION "leader_lease_renew_a4382d29"(text,text,bigint,bigint)
RETURNS TABLE (renewed boolean, token bigint, holder text, released boolean) LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
  UPDATE "leader_lease" SET
    expires_at = now() + $4::bigint * interval '1 microsecond',
    renewed_at = now()
  WHERE job_name = $1::text AND holder = $2::text AND fencing_token = $3::bigint
    AND released_at IS NULL;
  IF FOUND THEN
    RETURN QUERY SELECT true, $3::bigint, $2::text, false;
  ELSE
    RETURN QUERY SELECT false, l.fencing_token AS token, l.holder, coalesce(l.released_at IS NOT NULL, false) AS released
FROM (VALUES (1)) AS one LEFT JOIN "leader_lease" AS l ON l.job_name = $1::text;
  END IF;
END
$fn$