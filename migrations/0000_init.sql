CREATE TABLE "apis" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"store_encrypted_keys" boolean DEFAULT false NOT NULL,
	"default_prefix" text,
	"default_bytes" integer,
	"delete_protection" boolean DEFAULT false NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint,
	"deleted_at_m" bigint
);
--> statement-breakpoint
CREATE TABLE "encrypted_keys" (
	"key_id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"encrypted" text NOT NULL,
	"encryption_key_id" text NOT NULL,
	"created_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "encryption_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"wrapped" text NOT NULL,
	"master_key_fingerprint" text NOT NULL,
	"created_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "identities" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"external_id" text NOT NULL,
	"environment" text DEFAULT 'default' NOT NULL,
	"meta" jsonb,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint
);
--> statement-breakpoint
CREATE TABLE "keys" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"api_id" text NOT NULL,
	"hash" text NOT NULL,
	"start" text NOT NULL,
	"prefix" text,
	"name" text,
	"owner_id" text,
	"identity_id" text,
	"meta" jsonb,
	"expires" timestamp (3) with time zone,
	"remaining_requests" integer,
	"refill_day" smallint,
	"refill_amount" integer,
	"last_refill_at" timestamp (3) with time zone,
	"enabled" boolean DEFAULT true NOT NULL,
	"environment" text,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint,
	"deleted_at_m" bigint,
	CONSTRAINT "keys_remaining_not_negative" CHECK ("keys"."remaining_requests" >= 0)
);
--> statement-breakpoint
CREATE TABLE "keys_permissions" (
	"key_id" text NOT NULL,
	"permission_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"created_at_m" bigint NOT NULL,
	CONSTRAINT "keys_permissions_key_id_permission_id_pk" PRIMARY KEY("key_id","permission_id")
);
--> statement-breakpoint
CREATE TABLE "keys_roles" (
	"key_id" text NOT NULL,
	"role_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"created_at_m" bigint NOT NULL,
	CONSTRAINT "keys_roles_key_id_role_id_pk" PRIMARY KEY("key_id","role_id")
);
--> statement-breakpoint
CREATE TABLE "permissions" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"slug" text NOT NULL,
	"description" text,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint
);
--> statement-breakpoint
CREATE TABLE "ratelimits" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"key_id" text,
	"identity_id" text,
	"limit" integer NOT NULL,
	"duration" bigint NOT NULL,
	"auto_apply" boolean DEFAULT false NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint,
	CONSTRAINT "ratelimits_owner" CHECK (("ratelimits"."key_id" is null) <> ("ratelimits"."identity_id" is null))
);
--> statement-breakpoint
CREATE TABLE "roles" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint
);
--> statement-breakpoint
CREATE TABLE "roles_permissions" (
	"role_id" text NOT NULL,
	"permission_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"created_at_m" bigint NOT NULL,
	CONSTRAINT "roles_permissions_role_id_permission_id_pk" PRIMARY KEY("role_id","permission_id")
);
--> statement-breakpoint
CREATE TABLE "root_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"hash" text NOT NULL,
	"start" text NOT NULL,
	"name" text,
	"permissions" text[] NOT NULL,
	"created_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "keyhaven_settings" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workspaces" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint
);
--> statement-breakpoint
ALTER TABLE "apis" ADD CONSTRAINT "apis_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "encrypted_keys" ADD CONSTRAINT "encrypted_keys_key_id_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "encrypted_keys" ADD CONSTRAINT "encrypted_keys_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "encrypted_keys" ADD CONSTRAINT "encrypted_keys_encryption_key_id_encryption_keys_id_fk" FOREIGN KEY ("encryption_key_id") REFERENCES "public"."encryption_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "encryption_keys" ADD CONSTRAINT "encryption_keys_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "identities" ADD CONSTRAINT "identities_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys" ADD CONSTRAINT "keys_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys" ADD CONSTRAINT "keys_api_id_apis_id_fk" FOREIGN KEY ("api_id") REFERENCES "public"."apis"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys" ADD CONSTRAINT "keys_identity_id_identities_id_fk" FOREIGN KEY ("identity_id") REFERENCES "public"."identities"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys_permissions" ADD CONSTRAINT "keys_permissions_key_id_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys_permissions" ADD CONSTRAINT "keys_permissions_permission_id_permissions_id_fk" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys_roles" ADD CONSTRAINT "keys_roles_key_id_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "keys_roles" ADD CONSTRAINT "keys_roles_role_id_roles_id_fk" FOREIGN KEY ("role_id") REFERENCES "public"."roles"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "permissions" ADD CONSTRAINT "permissions_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratelimits" ADD CONSTRAINT "ratelimits_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratelimits" ADD CONSTRAINT "ratelimits_key_id_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratelimits" ADD CONSTRAINT "ratelimits_identity_id_identities_id_fk" FOREIGN KEY ("identity_id") REFERENCES "public"."identities"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "roles" ADD CONSTRAINT "roles_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "roles_permissions" ADD CONSTRAINT "roles_permissions_role_id_roles_id_fk" FOREIGN KEY ("role_id") REFERENCES "public"."roles"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "roles_permissions" ADD CONSTRAINT "roles_permissions_permission_id_permissions_id_fk" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "root_keys" ADD CONSTRAINT "root_keys_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "apis_workspace_idx" ON "apis" USING btree ("workspace_id");--> statement-breakpoint
CREATE INDEX "encryption_keys_workspace_idx" ON "encryption_keys" USING btree ("workspace_id","created_at_m");--> statement-breakpoint
CREATE UNIQUE INDEX "identities_workspace_external_id_idx" ON "identities" USING btree ("workspace_id","external_id");--> statement-breakpoint
CREATE UNIQUE INDEX "keys_hash_idx" ON "keys" USING btree ("hash");--> statement-breakpoint
CREATE INDEX "keys_api_idx" ON "keys" USING btree ("api_id","deleted_at_m");--> statement-breakpoint
CREATE INDEX "keys_workspace_idx" ON "keys" USING btree ("workspace_id");--> statement-breakpoint
CREATE INDEX "keys_owner_idx" ON "keys" USING btree ("owner_id");--> statement-breakpoint
CREATE INDEX "keys_identity_idx" ON "keys" USING btree ("identity_id");--> statement-breakpoint
CREATE INDEX "keys_permissions_permission_idx" ON "keys_permissions" USING btree ("permission_id");--> statement-breakpoint
CREATE INDEX "keys_roles_role_idx" ON "keys_roles" USING btree ("role_id");--> statement-breakpoint
CREATE UNIQUE INDEX "permissions_workspace_slug_idx" ON "permissions" USING btree ("workspace_id","slug");--> statement-breakpoint
CREATE INDEX "permissions_workspace_name_idx" ON "permissions" USING btree ("workspace_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "ratelimits_key_name_idx" ON "ratelimits" USING btree ("key_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "ratelimits_identity_name_idx" ON "ratelimits" USING btree ("identity_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "roles_workspace_name_idx" ON "roles" USING btree ("workspace_id","name");--> statement-breakpoint
CREATE INDEX "roles_permissions_permission_idx" ON "roles_permissions" USING btree ("permission_id");--> statement-breakpoint
CREATE UNIQUE INDEX "root_keys_hash_idx" ON "root_keys" USING btree ("hash");--> statement-breakpoint
CREATE INDEX "root_keys_workspace_idx" ON "root_keys" USING btree ("workspace_id");