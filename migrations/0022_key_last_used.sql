-- When each key was last verified and each root key last authenticated (issue 38 §1, v2's `lastUsedAt`), written by
-- the last-used flusher about once a second. Tables of their own, not columns of `keys` and `root_keys`: an update of
-- either moves the verification epoch (migrations verification_epoch, root_key_epoch), so a write every second would
-- drop hot keys from every replica's cache.
CREATE TABLE "key_last_used" (
	"key_id" text PRIMARY KEY NOT NULL,
	"last_used_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "root_key_last_used" (
	"root_key_id" text PRIMARY KEY NOT NULL,
	"last_used_at_m" bigint NOT NULL
);

--> statement-breakpoint
-- A key's (or root key's) time goes with it on every path that deletes one for good (keys.deleteKey permanent, an
-- API's keys, a workspace's cascade): one statement per deleting statement, from its transition table. Not a foreign
-- key: its check would lock the key's row at each first write of a time, and a key deleted while its time was in
-- flight would refuse the flush's whole statement. What a flush racing a deletion writes back is swept (LastUsed).
CREATE OR REPLACE FUNCTION keyhaven_forget_key_last_used() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM key_last_used l USING gone g WHERE l.key_id = g.id;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER keys_forget_last_used AFTER DELETE ON keys REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_forget_key_last_used();--> statement-breakpoint
CREATE OR REPLACE FUNCTION keyhaven_forget_root_key_last_used() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM root_key_last_used l USING gone g WHERE l.root_key_id = g.id;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER root_keys_forget_last_used AFTER DELETE ON root_keys REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_forget_root_key_last_used();
