DROP INDEX "key_migrations_workspace_idx";--> statement-breakpoint
-- drizzle-kit cannot name the primary key it replaces (it leaves this statement commented out for a hand to fill in):
-- "key_migrations_pkey" is the name PostgreSQL gave the single-column key of 0013_v2_key_migrations.sql.
ALTER TABLE "key_migrations" DROP CONSTRAINT "key_migrations_pkey";--> statement-breakpoint
ALTER TABLE "key_migrations" ADD CONSTRAINT "key_migrations_workspace_id_id_pk" PRIMARY KEY("workspace_id","id");
