CREATE TABLE "leader_lease_schedule" (
  "job_name" text NOT NULL,
  "scheduled_at" timestamptz NOT NULL,
  "outcome" text NOT NULL,
  "holder" text NOT NULL,
  "fencing_token" bigint NOT NULL,
  "first_at" timestamptz,
  "claimed_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("job_name", "scheduled_at")
)