CREATE TABLE "idempotency_keys" (
	"scope" text NOT NULL,
	"key_hash" text NOT NULL,
	"fingerprint" text NOT NULL,
	"status" integer NOT NULL,
	"answer" text NOT NULL,
	"created_at_m" bigint NOT NULL,
	CONSTRAINT "idempotency_keys_scope_key_hash_pk" PRIMARY KEY("scope","key_hash")
);
--> statement-breakpoint
CREATE INDEX "idempotency_keys_time_idx" ON "idempotency_keys" USING btree ("created_at_m");