CREATE TABLE "key_migrations" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"algorithm" text NOT NULL,
	"created_at_m" bigint NOT NULL,
	CONSTRAINT "key_migrations_algorithm" CHECK ("key_migrations"."algorithm" in ('sha256', 'github.com/seamapi/prefixed-api-key'))
);
--> statement-breakpoint
ALTER TABLE "keys" ADD COLUMN "pending_migration_id" text;--> statement-breakpoint
ALTER TABLE "key_migrations" ADD CONSTRAINT "key_migrations_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "key_migrations_workspace_idx" ON "key_migrations" USING btree ("workspace_id");