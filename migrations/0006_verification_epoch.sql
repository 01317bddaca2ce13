-- The verification cache's epoch. Every replica may keep verified keys in memory, but before it answers from that
-- memory it reads the epoch in a statement that started after the verification arrived; the cached entries are used
-- only when the epoch is the one they were read with. Every committed write that can change what a verification
-- answers adds 1 (once per transaction) to one of 16 shards, so the sum grows with each such commit and equal sums
-- mean no such commit happened in between. Shards spread the row lock, so concurrent writers rarely wait on each other.
CREATE TABLE IF NOT EXISTS keyhaven_epoch (shard smallint PRIMARY KEY, value bigint NOT NULL DEFAULT 0);
--> statement-breakpoint
INSERT INTO keyhaven_epoch (shard) SELECT generate_series(0, 15) ON CONFLICT DO NOTHING;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION keyhaven_bump_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('keyhaven.epoch_bumped', true), '') <> 'on' THEN
    UPDATE keyhaven_epoch SET value = value + 1 WHERE shard = (txid_current() % 16)::smallint;
    PERFORM set_config('keyhaven.epoch_bumped', 'on', true);
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- A key's own row: any change but to its remaining uses (which verification always reads and writes in the database)
-- and the bookkeeping columns. Whether it has a usage limit at all does count.
CREATE TRIGGER keys_bump_epoch_on_update AFTER UPDATE ON keys FOR EACH ROW
WHEN ((OLD.remaining_requests IS NULL) IS DISTINCT FROM (NEW.remaining_requests IS NULL)
  OR (OLD.id, OLD.workspace_id, OLD.api_id, OLD.hash, OLD.start, OLD.prefix, OLD.name, OLD.owner_id, OLD.identity_id,
      OLD.meta, OLD.expires, OLD.refill_day, OLD.refill_amount, OLD.enabled, OLD.environment, OLD.created_at_m,
      OLD.deleted_at_m)
  IS DISTINCT FROM (NEW.id, NEW.workspace_id, NEW.api_id, NEW.hash, NEW.start, NEW.prefix, NEW.name, NEW.owner_id,
      NEW.identity_id, NEW.meta, NEW.expires, NEW.refill_day, NEW.refill_amount, NEW.enabled, NEW.environment,
      NEW.created_at_m, NEW.deleted_at_m))
EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER keys_bump_epoch_on_delete AFTER DELETE ON keys FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
-- What a verification reads besides the key: new rows of these change nothing already cached, only edits and deletions.
CREATE TRIGGER workspaces_bump_epoch AFTER UPDATE OR DELETE ON workspaces FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER apis_bump_epoch AFTER UPDATE OR DELETE ON apis FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER identities_bump_epoch AFTER UPDATE OR DELETE ON identities FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER permissions_bump_epoch AFTER UPDATE OR DELETE ON permissions FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER roles_bump_epoch AFTER UPDATE OR DELETE ON roles FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
-- Links and limits: a new row can change an existing key's answer (a role granted, a limit added to its identity).
CREATE TRIGGER keys_roles_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON keys_roles FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER keys_permissions_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON keys_permissions FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER roles_permissions_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON roles_permissions FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER ratelimits_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON ratelimits FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
