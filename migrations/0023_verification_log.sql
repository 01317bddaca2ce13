-- The raw verification log behind v2 analytics.getVerifications (issue 38 §2): one row per verification the
-- analytics count, appended in batches by the verification log's flusher, deleted by age
-- (KEYHAVEN_VERIFICATION_LOG_DAYS) and beyond a cap per workspace (KEYHAVEN_VERIFICATION_LOG_MAX_ROWS). Upstream's
-- raw table's columns: key_space_id is the key's API, region the instance that verified (KEYHAVEN_REGION).
CREATE TABLE "key_verifications_log" (
	"request_id" text NOT NULL,
	"time_m" bigint NOT NULL,
	"workspace_id" text NOT NULL,
	"key_space_id" text NOT NULL,
	"key_id" text NOT NULL,
	"identity_id" text,
	"external_id" text,
	"outcome" text NOT NULL,
	"tags" text[] DEFAULT '{}'::text[] NOT NULL,
	"spent_credits" bigint DEFAULT 0 NOT NULL,
	"latency" double precision DEFAULT 0 NOT NULL,
	"region" text NOT NULL
);
--> statement-breakpoint
-- What the hourly counts sum besides the count, so that the aggregates answer spent_credits and latency_avg.
ALTER TABLE "verification_counts" ADD COLUMN "spent_credits" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "verification_counts" ADD COLUMN "latency_sum" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "key_verifications_log_workspace_time_idx" ON "key_verifications_log" USING btree ("workspace_id","time_m");--> statement-breakpoint
CREATE INDEX "key_verifications_log_workspace_key_time_idx" ON "key_verifications_log" USING btree ("workspace_id","key_id","time_m");