CREATE TABLE "ratelimit_namespaces" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint,
	"deleted_at_m" bigint
);
--> statement-breakpoint
CREATE TABLE "ratelimit_overrides" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"namespace_id" text NOT NULL,
	"identifier" text NOT NULL,
	"limit" integer NOT NULL,
	"duration" bigint NOT NULL,
	"async" boolean DEFAULT false NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint,
	"deleted_at_m" bigint
);
--> statement-breakpoint
ALTER TABLE "ratelimit_namespaces" ADD CONSTRAINT "ratelimit_namespaces_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratelimit_overrides" ADD CONSTRAINT "ratelimit_overrides_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratelimit_overrides" ADD CONSTRAINT "ratelimit_overrides_namespace_id_ratelimit_namespaces_id_fk" FOREIGN KEY ("namespace_id") REFERENCES "public"."ratelimit_namespaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "ratelimit_namespaces_workspace_name_idx" ON "ratelimit_namespaces" USING btree ("workspace_id","name") WHERE "ratelimit_namespaces"."deleted_at_m" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "ratelimit_overrides_namespace_identifier_idx" ON "ratelimit_overrides" USING btree ("namespace_id","identifier");--> statement-breakpoint
CREATE INDEX "ratelimit_overrides_live_by_namespace_idx" ON "ratelimit_overrides" USING btree ("namespace_id","id") WHERE "ratelimit_overrides"."deleted_at_m" is null;--> statement-breakpoint
CREATE INDEX "ratelimit_overrides_wildcards_idx" ON "ratelimit_overrides" USING btree ("namespace_id") WHERE "ratelimit_overrides"."deleted_at_m" is null and strpos("ratelimit_overrides"."identifier", '*') > 0;