CREATE TABLE "portal_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"portal_id" text NOT NULL,
	"external_id" text NOT NULL,
	"scopes" text[] NOT NULL,
	"api_ids" text[] NOT NULL,
	"preview" boolean DEFAULT false NOT NULL,
	"return_url" text,
	"minted_by" text NOT NULL,
	"code_hash" text NOT NULL,
	"code_expires_at_m" bigint NOT NULL,
	"token_hash" text,
	"token_created_at_m" bigint,
	"token_expires_at_m" bigint,
	"revoked_at_m" bigint,
	"rerolls" integer DEFAULT 0 NOT NULL,
	"created_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "portals" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"api_id" text NOT NULL,
	"slug" text NOT NULL,
	"name" text NOT NULL,
	"return_url" text,
	"branding_title" text,
	"accent_color" text,
	"logo_url" text,
	"enabled" boolean DEFAULT true NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint
);
--> statement-breakpoint
ALTER TABLE "portal_sessions" ADD CONSTRAINT "portal_sessions_portal_id_portals_id_fk" FOREIGN KEY ("portal_id") REFERENCES "public"."portals"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "portal_sessions" ADD CONSTRAINT "portal_sessions_minted_by_root_keys_id_fk" FOREIGN KEY ("minted_by") REFERENCES "public"."root_keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "portals" ADD CONSTRAINT "portals_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "portals" ADD CONSTRAINT "portals_api_id_apis_id_fk" FOREIGN KEY ("api_id") REFERENCES "public"."apis"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "portal_sessions_code_hash_idx" ON "portal_sessions" USING btree ("code_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "portal_sessions_token_hash_idx" ON "portal_sessions" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "portal_sessions_portal_idx" ON "portal_sessions" USING btree ("portal_id");--> statement-breakpoint
CREATE INDEX "portal_sessions_minted_by_idx" ON "portal_sessions" USING btree ("minted_by");--> statement-breakpoint
CREATE INDEX "portal_sessions_external_id_idx" ON "portal_sessions" USING btree ("workspace_id","external_id");--> statement-breakpoint
CREATE UNIQUE INDEX "portals_workspace_slug_idx" ON "portals" USING btree ("workspace_id","slug");--> statement-breakpoint
CREATE UNIQUE INDEX "portals_api_idx" ON "portals" USING btree ("api_id");--> statement-breakpoint
-- Deleting an identity ends the portal sessions of its externalId (issue 39): whatever deletes it (the v1 and v2
-- routes, the console, a workspace's cascade), in the deleting statement's own transaction.
CREATE OR REPLACE FUNCTION keyhaven_end_portal_sessions_of_identities() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE portal_sessions s SET revoked_at_m = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM old_identities o
    WHERE s.workspace_id = o.workspace_id AND s.external_id = o.external_id AND s.revoked_at_m IS NULL;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER identities_end_portal_sessions AFTER DELETE ON identities
  REFERENCING OLD TABLE AS old_identities FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_end_portal_sessions_of_identities();
