-- The raw verification log behind v2 analytics.getVerifications (issue 38 §2): every verification the analytics count,
-- appended by the verification log's flusher about once a second as one row per workspace and flush whose `events`
-- hold that second's verifications (a row per verification cost the embedded store five times as much: schema.ts),
-- deleted by age (KEYHAVEN_VERIFICATION_LOG_DAYS) and beyond a cap per workspace (KEYHAVEN_VERIFICATION_LOG_MAX_ROWS).
CREATE TABLE "key_verification_chunks" (
	"workspace_id" text NOT NULL,
	"from_m" bigint NOT NULL,
	"to_m" bigint NOT NULL,
	"n" integer NOT NULL,
	"region" text NOT NULL,
	"events" jsonb NOT NULL
);
--> statement-breakpoint
ALTER TABLE "verification_counts" ADD COLUMN "spent_credits" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "verification_counts" ADD COLUMN "latency_sum" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "key_verification_chunks_workspace_to_idx" ON "key_verification_chunks" USING btree ("workspace_id","to_m");--> statement-breakpoint
CREATE INDEX "key_verification_chunks_workspace_from_idx" ON "key_verification_chunks" USING btree ("workspace_id","from_m");
--> statement-breakpoint
-- One row per verification, with the columns of upstream's raw table (key_space_id is the key's API, region the
-- instance that verified), for every reader: analytics.getVerifications, the console, the tests. `chunk_to_m`, the
-- newest time of the row's chunk, lets a reader of a time range skip whole chunks on the index.
CREATE VIEW "key_verifications_log" AS
SELECT e->>0 AS request_id, (e->>1)::int8 AS time_m, c.workspace_id, e->>2 AS key_space_id, e->>3 AS key_id,
  e->>4 AS identity_id, e->>5 AS external_id, e->>6 AS outcome, ARRAY(SELECT jsonb_array_elements_text(e->7)) AS tags,
  (e->>8)::int8 AS spent_credits, (e->>9)::float8 AS latency, c.region, c.to_m AS chunk_to_m
FROM key_verification_chunks c CROSS JOIN LATERAL jsonb_array_elements(c.events) e;
