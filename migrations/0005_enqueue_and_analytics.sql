CREATE TABLE "migration_batches" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"migration_id" text NOT NULL,
	"api_id" text NOT NULL,
	"keys" jsonb NOT NULL,
	"key_count" integer NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"imported" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"created_at_m" bigint NOT NULL,
	"processed_at_m" bigint
);
--> statement-breakpoint
CREATE TABLE "migration_errors" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"batch_id" bigint NOT NULL,
	"workspace_id" text NOT NULL,
	"migration_id" text NOT NULL,
	"key_index" integer,
	"code" text NOT NULL,
	"message" text NOT NULL,
	"created_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "verification_counts" (
	"key_id" text NOT NULL,
	"hour_m" bigint NOT NULL,
	"outcome" text NOT NULL,
	"tags" text[] DEFAULT '{}'::text[] NOT NULL,
	"workspace_id" text NOT NULL,
	"api_id" text NOT NULL,
	"identity_id" text,
	"count" bigint NOT NULL,
	CONSTRAINT "verification_counts_key_id_hour_m_outcome_tags_pk" PRIMARY KEY("key_id","hour_m","outcome","tags")
);
--> statement-breakpoint
ALTER TABLE "migration_batches" ADD CONSTRAINT "migration_batches_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "migration_errors" ADD CONSTRAINT "migration_errors_batch_id_migration_batches_id_fk" FOREIGN KEY ("batch_id") REFERENCES "public"."migration_batches"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "migration_batches_pending_idx" ON "migration_batches" USING btree ("id") WHERE "migration_batches"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "migration_batches_migration_idx" ON "migration_batches" USING btree ("workspace_id","migration_id");--> statement-breakpoint
CREATE INDEX "migration_errors_migration_idx" ON "migration_errors" USING btree ("workspace_id","migration_id","batch_id");--> statement-breakpoint
CREATE INDEX "verification_counts_api_hour_idx" ON "verification_counts" USING btree ("workspace_id","api_id","hour_m");