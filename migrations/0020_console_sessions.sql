CREATE TABLE "console_sessions" (
	"id_hash" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"workspace_id" text,
	"root_key_id" text,
	"root_key_hash" text,
	"operator_check" text,
	"created_at_m" bigint NOT NULL,
	"last_seen_at_m" bigint NOT NULL,
	"expires_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "console_sessions_expires_idx" ON "console_sessions" USING btree ("expires_at_m");