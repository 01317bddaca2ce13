ALTER TABLE "keys" ALTER COLUMN "hash" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "keys" ADD COLUMN "adopted_at_m" bigint;--> statement-breakpoint
CREATE INDEX "keys_pending_idx" ON "keys" USING btree ("workspace_id","api_id") WHERE "keys"."hash" is null and "keys"."deleted_at_m" is null;