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
-- The events of a chunk, planned as 1,000 rows a chunk (a chunk holds at most 500 on the embedded store, 5,000 on
-- PostgreSQL): the embedded store bounds an analytics query by its planned cost (its statement_timeout cannot
-- interrupt a statement on keyhaven's own thread), and jsonb_array_elements is planned as 100 rows whatever it holds,
-- so a cross join of the log was planned a thousand times cheaper than it ran. plpgsql, so that the planner cannot
-- inline it back to jsonb_array_elements (a SQL function would be); its materialisation costs reads about 0.6 µs an event.
CREATE FUNCTION keyhaven_chunk_events(events jsonb) RETURNS SETOF jsonb LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE ROWS 1000 AS $$
BEGIN
  RETURN QUERY SELECT jsonb_array_elements(events);
END $$;--> statement-breakpoint
CREATE VIEW "key_verifications_log" AS
SELECT e->>0 AS request_id, (e->>1)::int8 AS time_m, c.workspace_id, e->>2 AS key_space_id, e->>3 AS key_id,
  e->>4 AS identity_id, e->>5 AS external_id, e->>6 AS outcome, ARRAY(SELECT jsonb_array_elements_text(e->7)) AS tags,
  (e->>8)::int8 AS spent_credits, (e->>9)::float8 AS latency, c.region, c.to_m AS chunk_to_m
FROM key_verification_chunks c CROSS JOIN LATERAL keyhaven_chunk_events(c.events) e;
