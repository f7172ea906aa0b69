CREATE TABLE "leader_lease_history" (
  "job_name" text NOT NULL,
  "slot" integer NOT NULL DEFAULT 1,
  "holder" text NOT NULL,
  "fencing_token" bigint NOT NULL,
  "attempt" integer NOT NULL DEFAULT 1,
  "started_at" timestamptz NOT NULL,
  "finished_at" timestamptz NOT NULL,
  "exit_code" integer,
  "outcome" text NOT NULL,
  "scheduled_at" timestamptz,
  "output" bytea,
  "stopped_by" text
)