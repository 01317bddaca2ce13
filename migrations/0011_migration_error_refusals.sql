-- Why a key of an enqueued batch was not imported, as the core's refusal (a kind and its facts): each wire adapter words it
-- when it is read. Rows from before keep their stored code and message.
ALTER TABLE "migration_errors" ADD COLUMN "refusal" jsonb;