CREATE TABLE "audit_log" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text,
	"event" text NOT NULL,
	"actor_kind" text NOT NULL,
	"actor_id" text NOT NULL,
	"actor_name" text NOT NULL,
	"targets" jsonb NOT NULL,
	"description" text NOT NULL,
	"details" jsonb,
	"surface" text NOT NULL,
	"request_id" text,
	"client_address" text,
	"user_agent" text,
	"created_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "audit_log_workspace_time_idx" ON "audit_log" USING btree ("workspace_id","created_at_m","id");--> statement-breakpoint
CREATE INDEX "audit_log_time_idx" ON "audit_log" USING btree ("created_at_m","id");--> statement-breakpoint
CREATE INDEX "audit_log_targets_idx" ON "audit_log" USING gin ("targets" jsonb_path_ops);