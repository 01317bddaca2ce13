ALTER TABLE "migration_batches" ALTER COLUMN "keys" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "migration_batches" ADD COLUMN "next_attempt_at_m" bigint;--> statement-breakpoint
ALTER TABLE "migration_batches" ADD COLUMN "last_error" text;