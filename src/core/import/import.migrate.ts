import { requirePermission } from "../principal.js";
import { hashKey, sha256Hex } from "../../crypto/hash.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import { ConflictError, InvalidInputError, NotFoundError } from "../../errors.js";
import { findLiveApiIds } from "../../storage/apis/apis.repository.js";
import {
  findKeyMigration,
  findPendingKey,
  insertKeyMigration,
  type KeyMigrationRow,
  rehashPendingKey,
} from "../../storage/import/keyMigrations.repository.js";
import type { KeyMigrationAlgorithm } from "../../storage/schema.js";
import type { StatisticsRefresher } from "../../storage/statistics.js";
import type { KeyNamedRatelimit } from "../../storage/keys/keys.ratelimit.repository.js";
import type { ImportKey } from "./import.keys.types.js";
import { insertLeavingOutExisting } from "./import.batch.js";
import { createImportNames } from "./import.names.js";
import { requireNamesWithinBounds } from "../rbac/rbac.bounds.js";
import { importPermission } from "./import.permissions.js";
import { planSealedImport, sealKeys } from "./import.plan.js";
import { requireRemainingForRefill } from "../keys/keys.credits.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

export const PREFIXED_API_KEY: KeyMigrationAlgorithm = "github.com/seamapi/prefixed-api-key";

/** One key of v2's keys.migrateKeys, after the adapter's validation: its hash (of the migration's algorithm) and settings. */
export type MigrateKey = {
  hash: string;
  name?: string | undefined;
  externalId?: string | undefined;
  meta?: Record<string, unknown> | undefined;
  roles?: string[] | undefined;
  /** Permission slugs. */
  permissions?: string[] | undefined;
  expires?: number | undefined;
  enabled?: boolean | undefined;
  /** `remaining` null: unlimited (as absent). */
  credits?:
    | {
        remaining: number | null;
        refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number | undefined } | undefined;
      }
    | undefined;
  ratelimits?: { name: string; limit: number; duration: number; autoApply?: boolean | undefined }[] | undefined;
};

export type MigrateKeysResult = {
  /** The keys created, in request order. */
  migrated: { hash: string; keyId: string }[];
  /** Hashes a key (of any workspace, deleted ones included) already had: not migrated. */
  failed: string[];
};

type MigrateStore = { db: Db; keyring: Keyring; statistics: Pick<StatisticsRefresher, "onImported">; changes: WriteGate };

/**
 * v2's keys.migrateKeys over the import core (the planner and the insert of migrations.createKeys): keys given by a
 * hash are created in `apiId` with `pending_migration_id`, an empty `start`, and the roles and permissions they name
 * (created when missing, unlike v1's import, which refuses them). The checks, in the order a client observes them:
 * `create_key` (before the API is read), the API, the migration (an id the caller's workspace has not used yet is
 * created for it with `sha256`; ids are per workspace), a hash repeated in the request, a rate-limit name
 * repeated in a key, refill on unlimited credits. One transaction (the write gate's): a hash that exists already is
 * left out and reported in `failed`; any other failure writes nothing. Recorded: import.create_keys naming the API
 * and every key created (none when every hash existed), migration.create when the migration was created here, and
 * role.create / permission.create for the names created on the way.
 */
export async function migrateKeys(
  store: MigrateStore,
  caller: Caller,
  input: { migrationId: string; apiId: string; keys: MigrateKey[] },
  now: number,
): Promise<MigrateKeysResult> {
  const { db } = store;
  const { workspaceId } = caller;
  requireNamesWithinBounds(input.keys);
  requirePermission(caller, importPermission(input.apiId));
  const liveApis = await findLiveApiIds(db, workspaceId, [input.apiId]);
  if (!liveApis.has(input.apiId)) throw new NotFoundError("api", input.apiId);

  const result = await store.changes.change(caller, async (tx, record) => {
    // Created here, so a request refused below leaves no migration behind.
    if (await migrationOfWorkspace(tx, workspaceId, input.migrationId, now)) {
      record({
        event: "migration.create",
        targets: [{ type: "migration", id: input.migrationId }],
        description: `created migration ${input.migrationId} (sha256)`,
        details: { algorithm: "sha256" },
      });
    }
    const items = input.keys.map((key) => importKeyOf(input.apiId, key));
    // The one rule for a key given twice (migrations.createKeys' too); v2 answers it as bad input.
    const sealed = sealKeys(items, { keyring: store.keyring, dataKey: undefined });
    input.keys.forEach((key, index) => {
      const names = new Set<string>();
      for (const r of key.ratelimits ?? []) {
        if (names.has(r.name)) throw new ConflictError("ratelimit", { kind: "ratelimitNameRepeated", name: r.name });
        names.add(r.name);
      }
      requireRemainingForRefill(items[index]!, "import");
    });
    const candidates = items.map((item, index) => ({ item, index }));
    const { inserted, existing } = await insertLeavingOutExisting(
      tx,
      candidates,
      (c) => sealed[c.index]!.hash,
      async (left) => {
        const { roleIds, permissionIds } = await createImportNames(
          tx,
          workspaceId,
          left.map((c) => c.item),
          now,
          record,
        );
        const plan = planSealedImport(
          left.map((c) => c.item),
          left.map((c) => sealed[c.index]!),
          { workspaceId, roleIds, permissionIds, now, pendingMigrationId: input.migrationId },
        );
        plan.identityMeta = {};
        plan.namedRatelimits = left.flatMap(({ index }): KeyNamedRatelimit[] =>
          (input.keys[index]!.ratelimits ?? []).map((r) => ({
            keyId: sealed[index]!.id,
            workspaceId,
            name: r.name,
            limit: r.limit,
            duration: r.duration,
            autoApply: r.autoApply ?? false,
          })),
        );
        return plan;
      },
    );
    const migrated = inserted.map(({ index }) => ({ hash: sealed[index]!.hash, keyId: sealed[index]!.id }));
    if (migrated.length > 0) {
      // One entry for the request, naming its keys (never their hashes).
      record({
        event: "import.create_keys",
        targets: [{ type: "api", id: input.apiId }, ...migrated.map((m) => ({ type: "key", id: m.keyId }))],
        description: `migrated ${migrated.length} ${migrated.length === 1 ? "key" : "keys"} into ${input.apiId} (migration ${input.migrationId})`,
        details: { count: migrated.length },
      });
    }
    return { migrated, failed: existing.map(({ index }) => sealed[index]!.hash) };
  });
  store.statistics.onImported(result.migrated.length);
  return result;
}

/** A key of migrateKeys as the import planner takes it (v1's `remaining` and `refill`; `start` empty until verified). */
function importKeyOf(apiId: string, key: MigrateKey): ImportKey {
  const remaining = key.credits?.remaining ?? undefined;
  return {
    apiId,
    hash: { value: key.hash, variant: "sha256_base64" },
    start: "",
    name: key.name,
    externalId: key.externalId,
    meta: key.meta,
    roles: key.roles,
    permissions: key.permissions,
    expires: key.expires,
    enabled: key.enabled,
    remaining,
    refill: key.credits?.refill,
  };
}

/**
 * Makes sure the caller's workspace has the migration `id`, created with `sha256` when it has none of that id yet
 * (keyhaven's self-serve migrations; upstream's support creates them); true when it was created here. Ids are per
 * workspace: whether another workspace uses the same id changes nothing and cannot be learnt.
 */
async function migrationOfWorkspace(db: Db, workspaceId: string, id: string, now: number): Promise<boolean> {
  const created = await insertKeyMigration(db, { id, workspaceId, algorithm: "sha256" }, now);
  if (!(await findKeyMigration(db, workspaceId, id))) throw new NotFoundError("migration", id);
  return created;
}

/**
 * keyhaven's extension of v2: creates a migration for the caller's workspace with the algorithm its keys' hashes
 * were made with. The id is the caller's; one the caller's workspace has already is a conflict (another
 * workspace's is not: ids are per workspace).
 */
export async function createKeyMigration(
  store: { changes: WriteGate },
  caller: Caller,
  input: { migrationId: string; algorithm: KeyMigrationAlgorithm },
  now: number,
): Promise<KeyMigrationRow> {
  requirePermission(caller, { or: ["*", "api.*.create_key"] });
  const migration = { id: input.migrationId, workspaceId: caller.workspaceId, algorithm: input.algorithm };
  return store.changes.change(caller, async (tx, record) => {
    if (!(await insertKeyMigration(tx, migration, now))) {
      throw new ConflictError("migration", { kind: "migrationExists", migrationId: input.migrationId });
    }
    record({
      event: "migration.create",
      targets: [{ type: "migration", id: migration.id }],
      description: `created migration ${migration.id} (${migration.algorithm})`,
      details: { algorithm: migration.algorithm },
    });
    return migration;
  });
}

/**
 * The first verification of a key migrated by a prefixed-api-key hash (contract §6.3), called by verification when
 * the key's own hash finds nothing and the request names a migration: the migration is looked up in `workspaceId`
 * (the caller's), the key split into `<prefix>_<shortToken>_<longToken>` (fewer than three parts: InvalidInputError),
 * and the key pending in that migration under hex(sha256(longToken)) gets its own hash and `start`, only if
 * `mayVerify` says the caller may verify that key (v2: the root key's verify_key for its API), so that a caller
 * who may not verify it changes nothing. True when a key was rehashed (the caller then looks it up again by its own
 * hash); false: the key stays not found.
 */
export async function completeKeyMigration(
  db: Db,
  request: { key: string; migrationId: string; workspaceId: string },
  now: number,
  mayVerify: (key: { id: string; apiId: string }) => boolean = () => true,
): Promise<boolean> {
  const migration = await findKeyMigration(db, request.workspaceId, request.migrationId);
  if (!migration) return false;
  // A sha256 migration's keys verify by their own hash: nothing to complete.
  if (migration.algorithm !== PREFIXED_API_KEY) return false;
  const parts = request.key.split("_");
  if (parts.length < 3) throw new InvalidInputError({ kind: "invalidKeyFormat" });
  const longToken = parts[parts.length - 1]!;
  const shortToken = parts[parts.length - 2]!;
  const prefix = parts.slice(0, -2).join("_");
  const ref = { workspaceId: request.workspaceId, migrationId: request.migrationId, pendingHash: sha256Hex(longToken) };
  const pending = await findPendingKey(db, ref);
  if (pending === undefined || !mayVerify(pending)) return false;
  return rehashPendingKey(
    db,
    {
      workspaceId: ref.workspaceId,
      migrationId: ref.migrationId,
      pendingHash: ref.pendingHash,
      keyId: pending.id,
      hash: hashKey(request.key),
      start: `${prefix}_${`${shortToken}_${longToken}`.slice(0, 4)}`,
    },
    now,
  );
}
