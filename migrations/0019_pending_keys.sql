ALTER TABLE "keys" ALTER COLUMN "hash" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "keys" ADD COLUMN "adopted_at_m" bigint;