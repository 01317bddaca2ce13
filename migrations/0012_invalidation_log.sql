-- What each epoch move changed (issue 13 §1). The epoch of migration `verification_epoch` says only that something
-- changed, so every replica emptied every cache on every write. Now each write that moves the epoch also logs, in
-- its own transaction, a tag per thing it changed (`key:<id>`, `api:<id>`, `ws:<id>`, `identity:<id>`, `role:<id>`,
-- `root:<id>`, `ns:<id>`; `*` for everything), with its transaction id. A reader that saw the epoch move reads the
-- rows of the transactions its previous snapshot did not see (pg_visible_in_snapshot: transactions commit out of
-- order, so "newer than the last row read" would miss one that committed late) and drops only the cached entries
-- carrying those tags; when it cannot (rows pruned, too many) it empties everything as before.
CREATE TABLE IF NOT EXISTS keyhaven_invalidations (
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  tag text NOT NULL
);
--> statement-breakpoint
CREATE INDEX IF NOT EXISTS keyhaven_invalidations_xid_idx ON keyhaven_invalidations (xid);
--> statement-breakpoint
CREATE INDEX IF NOT EXISTS keyhaven_invalidations_at_idx ON keyhaven_invalidations (at);
--> statement-breakpoint
-- The greatest transaction id whose rows pruning deleted: a reader whose previous snapshot's xmin is not above it
-- may have lost rows it needed, and empties its caches instead.
CREATE TABLE IF NOT EXISTS keyhaven_invalidations_pruned (
  id smallint PRIMARY KEY DEFAULT 0 CHECK (id = 0),
  through xid8 NOT NULL
);
--> statement-breakpoint
INSERT INTO keyhaven_invalidations_pruned (id, through) VALUES (0, '0') ON CONFLICT DO NOTHING;
--> statement-breakpoint
-- Moves the epoch (once per transaction, as before) and logs the tag. A transaction that logs more than 100 tags (a
-- bulk write: an API deleted with its keys, an import) logs `*` once instead and nothing more: readers empty their
-- caches, which is cheaper for everyone than thousands of rows.
CREATE OR REPLACE FUNCTION keyhaven_bump_epoch(tag text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  logged int;
BEGIN
  IF coalesce(current_setting('keyhaven.epoch_bumped', true), '') <> 'on' THEN
    UPDATE keyhaven_epoch SET value = value + 1 WHERE shard = (txid_current() % 16)::smallint;
    PERFORM set_config('keyhaven.epoch_bumped', 'on', true);
  END IF;
  IF tag IS NULL THEN
    RETURN;
  END IF;
  logged := coalesce(nullif(current_setting('keyhaven.invalidations_logged', true), ''), '0')::int;
  IF logged < 100 THEN
    INSERT INTO keyhaven_invalidations (tag) VALUES (tag);
  ELSIF logged = 100 THEN
    INSERT INTO keyhaven_invalidations (tag) VALUES ('*');
  END IF;
  PERFORM set_config('keyhaven.invalidations_logged', (logged + 1)::text, true);
END
$$;
--> statement-breakpoint
-- The trigger function of migrations `verification_epoch` and `root_key_epoch`, now naming what its row changes.
-- A cached key carries key:, api:, ws:, identity: and role: tags (verification.cache.ts), a root key root: and ws:,
-- a rate limit lookup ns: and ws:. A permission deleted cascades to keys_permissions and roles_permissions, whose
-- rows log their key and role; a permission renamed logs its workspace.
CREATE OR REPLACE FUNCTION keyhaven_bump_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  CASE TG_TABLE_NAME
    WHEN 'keys' THEN PERFORM keyhaven_bump_epoch('key:' || OLD.id);
    WHEN 'workspaces' THEN PERFORM keyhaven_bump_epoch('ws:' || OLD.id);
    WHEN 'apis' THEN PERFORM keyhaven_bump_epoch('api:' || OLD.id);
    WHEN 'identities' THEN PERFORM keyhaven_bump_epoch('identity:' || OLD.id);
    WHEN 'roles' THEN PERFORM keyhaven_bump_epoch('role:' || OLD.id);
    WHEN 'root_keys' THEN PERFORM keyhaven_bump_epoch('root:' || OLD.id);
    WHEN 'ratelimit_namespaces' THEN PERFORM keyhaven_bump_epoch('ns:' || OLD.id);
    WHEN 'permissions' THEN
      IF TG_OP = 'UPDATE' THEN
        PERFORM keyhaven_bump_epoch('ws:' || OLD.workspace_id);
      ELSE
        PERFORM keyhaven_bump_epoch(NULL);
      END IF;
    WHEN 'keys_roles', 'keys_permissions' THEN
      IF TG_OP <> 'INSERT' THEN PERFORM keyhaven_bump_epoch('key:' || OLD.key_id); END IF;
      IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.key_id IS DISTINCT FROM OLD.key_id) THEN
        PERFORM keyhaven_bump_epoch('key:' || NEW.key_id);
      END IF;
    WHEN 'roles_permissions' THEN
      IF TG_OP <> 'INSERT' THEN PERFORM keyhaven_bump_epoch('role:' || OLD.role_id); END IF;
      IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.role_id IS DISTINCT FROM OLD.role_id) THEN
        PERFORM keyhaven_bump_epoch('role:' || NEW.role_id);
      END IF;
    WHEN 'ratelimits' THEN
      IF TG_OP <> 'INSERT' THEN
        PERFORM keyhaven_bump_epoch(coalesce('key:' || OLD.key_id, 'identity:' || OLD.identity_id, '*'));
        IF OLD.key_id IS NOT NULL AND OLD.identity_id IS NOT NULL THEN
          PERFORM keyhaven_bump_epoch('identity:' || OLD.identity_id);
        END IF;
      END IF;
      IF TG_OP <> 'DELETE' THEN
        PERFORM keyhaven_bump_epoch(coalesce('key:' || NEW.key_id, 'identity:' || NEW.identity_id, '*'));
        IF NEW.key_id IS NOT NULL AND NEW.identity_id IS NOT NULL THEN
          PERFORM keyhaven_bump_epoch('identity:' || NEW.identity_id);
        END IF;
      END IF;
    WHEN 'ratelimit_overrides' THEN
      IF TG_OP <> 'INSERT' THEN PERFORM keyhaven_bump_epoch('ns:' || OLD.namespace_id); END IF;
      IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.namespace_id IS DISTINCT FROM OLD.namespace_id) THEN
        PERFORM keyhaven_bump_epoch('ns:' || NEW.namespace_id);
      END IF;
    ELSE
      PERFORM keyhaven_bump_epoch('*');
  END CASE;
  RETURN NULL;
END
$$;
