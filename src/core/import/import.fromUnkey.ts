import { isDeepStrictEqual } from "node:util";
import { hashKey } from "../../crypto/hash.js";
import { newId } from "../../ids.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { DataKey } from "../../storage/crypto/encryptionKeys.repository.js";
import type { StatisticsRefresher } from "../../storage/statistics.js";
import type { UnkeyFallback } from "../verification/verification.fallback.js";
import { type Db, isUniqueViolation } from "../../storage/client.js";
import { ConflictError } from "../../errors.js";
import { encryptionKeys, type AuditTarget } from "../../storage/schema.js";
import {
  countKeyStates,
  deleteLinksOutside,
  type ExistingKey,
  findApisById,
  findIdentitiesById,
  findIdentitiesOfWorkspace,
  findIdentityIdsByExternalId,
  findKeyIdsByHash,
  findKeysById,
  findLiveApisOfWorkspace,
  findNamespaceIdsByName,
  findOverrides,
  findPermissionIdsBySlug,
  findPermissionsById,
  findRoleIdsByName,
  findRolesById,
  insertApis,
  insertEncryptedCopies,
  insertIdentities,
  insertKeys,
  insertLinks,
  insertNamespaces,
  insertPermissions,
  insertRoles,
  type KeyUpdate,
  type OwnedRatelimit,
  replaceOwnedRatelimits,
  setApisStoreEncryptedKeys,
  updateApis,
  updateIdentities,
  updateKeys,
  updatePermissions,
  updateRoles,
  upsertOverrides,
} from "../../storage/import/fromUnkey.repository.js";
import { identityRatelimits } from "../../storage/identities/identities.repository.js";
import { keyRatelimits } from "../../storage/keys/keys.ratelimit.repository.js";
import { anyOfOne, identityPermission, keyPermission } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import type { RecordChange, WriteGate } from "../changes.js";
import { refillWithoutRemaining } from "../keys/keys.credits.js";
import { requirePermission } from "../principal.js";

// keyhaven import --from-unkey's server half (issue 36 §1, docs/api.md#keyhavencopyfromunkey): records of a hosted
// Unkey workspace upserted by the ids they had there, in one change of the write gate per request. An item that
// cannot be held is skipped with a reason naming fields and ids (never a value or a secret); the rest applies.

/** At most this many items, of every section together, per request. */
export const MAX_COPY_ITEMS = 1000;

export type CopyRatelimit = { name: string; limit: number; duration: number; autoApply: boolean };

export type CopyApi = { id: string; name: string };
export type CopyPermission = { id: string; name: string; slug: string; description?: string | undefined };
export type CopyRole = { id: string; name: string; description?: string | undefined; permissions?: string[] | undefined };
export type CopyIdentity = {
  id: string;
  externalId: string;
  meta?: Record<string, unknown> | undefined;
  ratelimits?: CopyRatelimit[] | undefined;
};
export type CopyKey = {
  id: string;
  apiId: string;
  start: string;
  createdAt: number;
  name?: string | undefined;
  meta?: Record<string, unknown> | undefined;
  expires?: number | undefined;
  enabled: boolean;
  credits?:
    | {
        remaining: number | null;
        refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number | undefined } | undefined;
      }
    | undefined;
  ratelimits?: CopyRatelimit[] | undefined;
  roles?: string[] | undefined;
  permissions?: string[] | undefined;
  identityId?: string | undefined;
  plaintext?: string | undefined;
  recoverable?: boolean | undefined;
};
export type CopyOverride = { namespace: string; identifier: string; limit: number; duration: number };

export type CopyInput = {
  apis?: CopyApi[] | undefined;
  permissions?: CopyPermission[] | undefined;
  roles?: CopyRole[] | undefined;
  identities?: CopyIdentity[] | undefined;
  keys?: CopyKey[] | undefined;
  overrides?: CopyOverride[] | undefined;
};

export type Skipped = { id: string; reason: string };
export type CopyCounts = { created: number; updated: number; unchanged: number; skipped: Skipped[] };
export type CopyResult = {
  apis: CopyCounts;
  permissions: CopyCounts;
  roles: CopyCounts;
  identities: CopyCounts;
  overrides: CopyCounts;
  keys: CopyCounts & { verifiable: number; pending: number };
};

type CopyStore = {
  db: Db;
  keyring: Keyring;
  changes: WriteGate;
  clock: { now(): number };
  statistics: Pick<StatisticsRefresher, "onImported">;
  /** The Unkey fallback, when configured: told of the pending keys a copy leaves, so they are asked about at once. */
  unkeyFallback?: Pick<UnkeyFallback, "notePending"> | undefined;
};

const counts = (): CopyCounts => ({ created: 0, updated: 0, unchanged: 0, skipped: [] });

/** Where an id stands: free, the caller's (live), or not the caller's to write (another workspace's, or deleted). */
function standing(
  existing: { workspaceId: string; deleted?: boolean } | undefined,
  workspaceId: string,
): "free" | "own" | Skipped["reason"] {
  if (existing === undefined) return "free";
  if (existing.workspaceId !== workspaceId) return "id is taken";
  if (existing.deleted) return "deleted in keyhaven";
  return "own";
}

const byId = <T extends { id: string }>(rows: T[]) => new Map(rows.map((r) => [r.id, r]));
const sameSet = (a: readonly string[], b: readonly string[]) => {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((x) => right.has(x));
};
const names = (list: string[]) => list.join(", ");
/** `meta` as stored: an absent or empty object is null. */
const metaOf = (meta: Record<string, unknown> | undefined) => (meta !== undefined && Object.keys(meta).length > 0 ? meta : null);
const sameMeta = (a: unknown, b: unknown) => isDeepStrictEqual(a ?? null, b ?? null);
const sameRatelimits = (a: readonly CopyRatelimit[], b: readonly CopyRatelimit[]) => {
  const key = (l: CopyRatelimit) => `${l.name}\u0000${l.limit}\u0000${l.duration}\u0000${l.autoApply}`;
  return sameSet(a.map(key), b.map(key));
};
/** Of rate limits named twice, the last wins (as v2's createKey). */
const distinctLimits = (limits: readonly CopyRatelimit[] | undefined): CopyRatelimit[] => [
  ...new Map((limits ?? []).map((l) => [l.name, l])).values(),
];

/**
 * Checks the permissions each section needs (what the v2 route creating that kind needs; `*` grants all), before
 * anything is read, so that a root key without them learns nothing of which ids exist.
 */
function requireCopyPermissions(caller: Caller, input: CopyInput): void {
  const ws = caller.workspaceId;
  if (input.apis?.length) requirePermission(caller, { or: ["*", "api.*.create_api"] });
  if (input.permissions?.length) requirePermission(caller, { or: ["*", "rbac.*.create_permission"] });
  if (input.roles?.length) requirePermission(caller, anyOfOne("rbac.*.create_role"));
  if (input.identities?.length) {
    requirePermission(caller, identityPermission(caller.access, ws, ["*", "identity.*.create_identity"], "create_identity"));
  }
  for (const apiId of new Set((input.keys ?? []).map((k) => k.apiId))) {
    requirePermission(caller, keyPermission(caller.access, ws, apiId, null, "create_key"));
  }
  for (const apiId of new Set((input.keys ?? []).filter((k) => k.recoverable).map((k) => k.apiId))) {
    requirePermission(caller, keyPermission(caller.access, ws, apiId, "*", "encrypt_key"));
  }
  if (input.overrides?.length) requirePermission(caller, { or: ["*", "ratelimit.*.set_override"] });
}

/**
 * Copies what a request of `keyhaven import --from-unkey` carries into the caller's workspace: apis, permissions,
 * roles, identities, keys and overrides, in that order (a key may name what the same request copies), each upserted
 * by its given id (or, for overrides, by namespace and identifier). Idempotent: a record that is as given is
 * unchanged, and the same request twice creates nothing the second time. A key without plaintext is created pending
 * (no hash); an existing key keeps its hash, and a pending one gets the hash of a plaintext given for it. One
 * transaction, one audit entry (`import.from_unkey`) naming every record created or updated (none for a request of
 * no items, which changes nothing).
 */
export async function copyFromUnkey(store: CopyStore, caller: Caller, input: CopyInput): Promise<CopyResult> {
  requireCopyPermissions(caller, input);
  // A request of no items (a page that came back empty) has nothing to change or record.
  const items = [input.apis, input.permissions, input.roles, input.identities, input.keys, input.overrides];
  if (items.every((section) => !section?.length)) return emptyResult();
  const now = store.clock.now();
  const recoverable = (input.keys ?? []).some((k) => k.recoverable && k.plaintext !== undefined);
  // Read before the transaction (as createKey does): a new data key is inserted by the change, remembered after it.
  const dataKey = recoverable ? await store.keyring.dataKeyFor(store.db, caller.workspaceId) : undefined;
  const result = await copyOnce(store, caller, input, dataKey, now);
  if (dataKey?.newRow) store.changes.afterCommit(caller, () => store.keyring.remember(dataKey));
  // Without this, the fallback's counts (refreshed every few seconds) would say "no pending keys" until the next
  // count, and a pending key verified right after its copy would be NOT_FOUND without Unkey being asked.
  const { unkeyFallback } = store;
  if (unkeyFallback !== undefined && result.keys.pending > 0) {
    store.changes.afterCommit(caller, () => unkeyFallback.notePending(caller.workspaceId, result.keys.pending));
  }
  // PGlite has no autovacuum: the tables a copy fills are analysed as after an import.
  store.statistics.onImported(result.keys.created);
  return result;
}

/**
 * A record the copy found free (or live) in its transaction was taken (or deleted) by a concurrent change before its
 * write: the whole copy is refused, and sent again it settles on what that change left.
 */
const copyRaced = () => new ConflictError("copy", { kind: "copyConflict" });

/**
 * The copy's one change. Every id, name, slug and hash it writes was checked free in its transaction, so a unique
 * violation means a concurrent change took one meanwhile: the change rolls back and the caller may send it again.
 */
async function copyOnce(
  store: CopyStore,
  caller: Caller,
  input: CopyInput,
  dataKey: DataKey | undefined,
  now: number,
): Promise<CopyResult> {
  try {
    return await store.changes.change(caller, (tx, record) => copyIn(tx, store.keyring, caller, input, dataKey, now, record));
  } catch (err) {
    if (isUniqueViolation(err)) throw copyRaced();
    throw err;
  }
}

async function copyIn(
  tx: Db,
  keyring: Keyring,
  caller: Caller,
  input: CopyInput,
  dataKey: DataKey | undefined,
  now: number,
  record: RecordChange,
): Promise<CopyResult> {
  {
    const targets: AuditTarget[] = [];
    const copy = new Copy(tx, keyring, caller, now, targets);
    const apis = await copy.apis(input.apis ?? [], input.keys ?? []);
    const permissions = await copy.permissions(input.permissions ?? []);
    const roles = await copy.roles(input.roles ?? []);
    const identities = await copy.identities(input.identities ?? []);
    const keys = await copy.keys(input.keys ?? [], dataKey);
    const overrides = await copy.overrides(input.overrides ?? []);
    const outcome: CopyResult = { apis, permissions, roles, identities, overrides, keys };
    record({
      event: "import.from_unkey",
      targets,
      description: `copied from hosted Unkey: ${targets.length} ${targets.length === 1 ? "record" : "records"} created or updated`,
      details: countsOnly(outcome),
    });
    return outcome;
  }
}

function emptyResult(): CopyResult {
  return {
    apis: counts(),
    permissions: counts(),
    roles: counts(),
    identities: counts(),
    overrides: counts(),
    keys: Object.assign(counts(), { verifiable: 0, pending: 0 }),
  };
}

/** The counts of a result for the audit entry: numbers only (a skipped item's reason is worded for the caller). */
function countsOnly(result: CopyResult): Record<string, unknown> {
  const of = (c: CopyCounts) => ({ created: c.created, updated: c.updated, unchanged: c.unchanged, skipped: c.skipped.length });
  return {
    apis: of(result.apis),
    permissions: of(result.permissions),
    roles: of(result.roles),
    identities: of(result.identities),
    keys: Object.assign(of(result.keys), { verifiable: result.keys.verifiable, pending: result.keys.pending }),
    overrides: of(result.overrides),
  };
}

/** One request's copy, section by section, in the gate's transaction. */
class Copy {
  private readonly ws: string;
  /** APIs of the workspace this request created or found live, and whether each stores encrypted keys. */
  private readonly liveApis = new Map<string, boolean>();

  constructor(
    private readonly tx: Db,
    private readonly keyring: Keyring,
    private readonly caller: Caller,
    private readonly now: number,
    private readonly targets: AuditTarget[],
  ) {
    this.ws = caller.workspaceId;
  }

  private target(type: string, id: string, name?: string) {
    this.targets.push(name === undefined ? { type, id } : { type, id, name });
  }

  async apis(items: CopyApi[], keys: CopyKey[]): Promise<CopyCounts> {
    const out = counts();
    // A recoverable key's API stores encrypted keys (hosted Unkey keeps such keys only in such an API).
    const encrypting = new Set(keys.filter((k) => k.recoverable && k.plaintext !== undefined).map((k) => k.apiId));
    const existing = byId(
      await findApisById(
        this.tx,
        items.map((i) => i.id),
      ),
    );
    const creates: CopyApi[] = [];
    const updates: { id: string; name: string; storeEncryptedKeys: boolean }[] = [];
    for (const item of items) {
      const found = existing.get(item.id);
      const where = standing(found, this.ws);
      if (where === "free") creates.push(item);
      else if (where !== "own") out.skipped.push({ id: item.id, reason: where });
      else if (found!.name !== item.name || (encrypting.has(item.id) && !found!.storeEncryptedKeys)) {
        updates.push({ id: item.id, name: item.name, storeEncryptedKeys: found!.storeEncryptedKeys || encrypting.has(item.id) });
      } else {
        out.unchanged++;
        this.liveApis.set(item.id, found!.storeEncryptedKeys);
      }
    }
    const inserted = await insertApis(
      this.tx,
      creates.map((a) => ({
        id: a.id,
        workspaceId: this.ws,
        name: a.name,
        storeEncryptedKeys: encrypting.has(a.id),
        createdAtM: this.now,
      })),
    );
    for (const a of creates) {
      if (!inserted.has(a.id)) throw copyRaced();
      out.created++;
      this.liveApis.set(a.id, encrypting.has(a.id));
      this.target("api", a.id, a.name);
    }
    await updateApis(this.tx, this.ws, updates, this.now);
    for (const a of updates) {
      out.updated++;
      this.liveApis.set(a.id, a.storeEncryptedKeys);
      this.target("api", a.id, a.name);
    }
    // The other APIs the keys name: live ones of the workspace, read (and held against deletion) in this transaction.
    const named = [...new Set(keys.map((k) => k.apiId))].filter((id) => !this.liveApis.has(id));
    const found = await findLiveApisOfWorkspace(this.tx, this.ws, named);
    const upgrade = found.filter((a) => encrypting.has(a.id) && !a.storeEncryptedKeys);
    // An API that received a recoverable key now stores encrypted keys, so that keys.getKey can decrypt it.
    await setApisStoreEncryptedKeys(
      this.tx,
      this.ws,
      upgrade.map((a) => a.id),
      this.now,
    );
    for (const a of found) this.liveApis.set(a.id, a.storeEncryptedKeys || encrypting.has(a.id));
    for (const a of upgrade) this.target("api", a.id);
    return out;
  }

  async permissions(items: CopyPermission[]): Promise<CopyCounts> {
    const out = counts();
    const existing = byId(
      await findPermissionsById(
        this.tx,
        items.map((i) => i.id),
      ),
    );
    const bySlug = await findPermissionIdsBySlug(
      this.tx,
      this.ws,
      items.map((i) => i.slug),
    );
    const creates: CopyPermission[] = [];
    const updates: { id: string; name: string; slug: string; description: string | null }[] = [];
    const slugsTaken = new Map<string, string>();
    for (const item of items) {
      const found = existing.get(item.id);
      const where = standing(found, this.ws);
      if (where !== "free" && where !== "own") {
        out.skipped.push({ id: item.id, reason: where });
        continue;
      }
      const holder = slugsTaken.get(item.slug) ?? bySlug.get(item.slug);
      if (holder !== undefined && holder !== item.id) {
        out.skipped.push({ id: item.id, reason: `slug is held by permission ${holder}` });
        continue;
      }
      slugsTaken.set(item.slug, item.id);
      const description = item.description ?? null;
      if (where === "free") creates.push(item);
      else if (found!.name !== item.name || found!.slug !== item.slug || found!.description !== description) {
        updates.push({ id: item.id, name: item.name, slug: item.slug, description });
      } else out.unchanged++;
    }
    const inserted = await insertPermissions(
      this.tx,
      creates.map((p) => ({
        id: p.id,
        workspaceId: this.ws,
        name: p.name,
        slug: p.slug,
        description: p.description ?? null,
        createdAtM: this.now,
      })),
    );
    for (const p of creates) {
      if (!inserted.has(p.id)) throw copyRaced();
      out.created++;
      this.target("permission", p.id, p.name);
    }
    await updatePermissions(this.tx, this.ws, updates, this.now);
    for (const p of updates) {
      out.updated++;
      this.target("permission", p.id, p.name);
    }
    return out;
  }

  async roles(items: CopyRole[]): Promise<CopyCounts> {
    const out = counts();
    const existing = byId(
      await findRolesById(
        this.tx,
        items.map((i) => i.id),
      ),
    );
    const byName = await findRoleIdsByName(
      this.tx,
      this.ws,
      items.map((i) => i.name),
    );
    const permissionIds = await findPermissionIdsBySlug(this.tx, this.ws, [...new Set(items.flatMap((r) => r.permissions ?? []))]);
    const creates: { item: CopyRole; permissionIds: string[] }[] = [];
    const updates: { item: CopyRole; permissionIds: string[] }[] = [];
    const namesTaken = new Map<string, string>();
    for (const item of items) {
      const found = existing.get(item.id);
      const where = standing(found, this.ws);
      if (where !== "free" && where !== "own") {
        out.skipped.push({ id: item.id, reason: where });
        continue;
      }
      const holder = namesTaken.get(item.name) ?? byName.get(item.name);
      if (holder !== undefined && holder !== item.id) {
        out.skipped.push({ id: item.id, reason: `name is held by role ${holder}` });
        continue;
      }
      const slugs = [...new Set(item.permissions ?? [])];
      const missing = slugs.filter((s) => !permissionIds.has(s));
      if (missing.length > 0) {
        out.skipped.push({ id: item.id, reason: `permissions not found: ${names(missing)}` });
        continue;
      }
      namesTaken.set(item.name, item.id);
      const ids = slugs.map((s) => permissionIds.get(s)!);
      if (where === "free") creates.push({ item, permissionIds: ids });
      else if (found!.name !== item.name || found!.description !== (item.description ?? null) || !sameSet(found!.permissionIds, ids)) {
        updates.push({ item, permissionIds: ids });
      } else out.unchanged++;
    }
    const inserted = await insertRoles(
      this.tx,
      creates.map(({ item }) => ({
        id: item.id,
        workspaceId: this.ws,
        name: item.name,
        description: item.description ?? null,
        createdAtM: this.now,
      })),
    );
    const created = creates.filter(({ item }) => inserted.has(item.id));
    if (created.length !== creates.length) throw copyRaced();
    await updateRoles(
      this.tx,
      this.ws,
      updates.map(({ item }) => ({ id: item.id, name: item.name, description: item.description ?? null })),
      this.now,
    );
    const sets = [...created, ...updates].map(({ item, permissionIds }) => ({ owner: item.id, members: permissionIds }));
    await deleteLinksOutside(
      this.tx,
      "rolePermissions",
      updates.map(({ item, permissionIds }) => ({ owner: item.id, members: permissionIds })),
    );
    await insertLinks(this.tx, "rolePermissions", this.ws, sets, this.now);
    out.created = created.length;
    out.updated = updates.length;
    for (const { item } of [...created, ...updates]) this.target("role", item.id, item.name);
    return out;
  }

  async identities(items: CopyIdentity[]): Promise<CopyCounts> {
    const out = counts();
    const ids = items.map((i) => i.id);
    const existing = byId(await findIdentitiesById(this.tx, ids));
    const byExternalId = await findIdentityIdsByExternalId(
      this.tx,
      this.ws,
      items.map((i) => i.externalId),
    );
    const limitsOf = await identityRatelimits(
      this.tx,
      [...existing.values()].filter((e) => e.workspaceId === this.ws).map((e) => e.id),
    );
    const creates: CopyIdentity[] = [];
    const updates: CopyIdentity[] = [];
    const taken = new Map<string, string>();
    for (const item of items) {
      const found = existing.get(item.id);
      const where = standing(found, this.ws);
      if (where !== "free" && where !== "own") {
        out.skipped.push({ id: item.id, reason: where });
        continue;
      }
      const holder = taken.get(item.externalId) ?? byExternalId.get(item.externalId);
      if (holder !== undefined && holder !== item.id) {
        out.skipped.push({ id: item.id, reason: `externalId is held by identity ${holder}` });
        continue;
      }
      taken.set(item.externalId, item.id);
      if (where === "free") creates.push(item);
      else if (
        found!.externalId !== item.externalId ||
        !sameMeta(found!.meta, metaOf(item.meta)) ||
        !sameRatelimits(limitsOf.get(item.id) ?? [], distinctLimits(item.ratelimits))
      ) {
        updates.push(item);
      } else out.unchanged++;
    }
    const inserted = await insertIdentities(
      this.tx,
      creates.map((i) => ({
        id: i.id,
        workspaceId: this.ws,
        externalId: i.externalId,
        environment: "default",
        meta: metaOf(i.meta),
        createdAtM: this.now,
      })),
    );
    const created = creates.filter((i) => inserted.has(i.id));
    if (created.length !== creates.length) throw copyRaced();
    if (updates.length > 0) {
      requirePermission(
        this.caller,
        identityPermission(this.caller.access, this.ws, ["*", "identity.*.update_identity"], "update_identity"),
      );
    }
    await updateIdentities(
      this.tx,
      this.ws,
      updates.map((i) => ({ id: i.id, externalId: i.externalId, meta: metaOf(i.meta) })),
      this.now,
    );
    await replaceOwnedRatelimits(
      this.tx,
      "identity",
      this.ws,
      [...created, ...updates].map((i) => ({ owner: i.id, limits: ownedLimits(i.id, i.ratelimits) })),
      this.now,
      () => newId("rl"),
    );
    out.created = created.length;
    out.updated = updates.length;
    for (const i of [...created, ...updates]) this.target("identity", i.id, i.externalId);
    return out;
  }

  async keys(items: CopyKey[], dataKey: DataKey | undefined): Promise<CopyResult["keys"]> {
    const out = counts();
    const existing = byId(
      await findKeysById(
        this.tx,
        items.map((k) => k.id),
      ),
    );
    const hashes = new Map<string, string>();
    for (const k of items) if (k.plaintext !== undefined) hashes.set(k.id, hashKey(k.plaintext));
    const holders = await findKeyIdsByHash(this.tx, [...new Set(hashes.values())]);
    const roleIds = await findRoleIdsByName(this.tx, this.ws, [...new Set(items.flatMap((k) => k.roles ?? []))]);
    const permissionIds = await findPermissionIdsBySlug(this.tx, this.ws, [...new Set(items.flatMap((k) => k.permissions ?? []))]);
    const identityIds = await findIdentitiesOfWorkspace(this.tx, this.ws, [
      ...new Set(items.flatMap((k) => (k.identityId ? [k.identityId] : []))),
    ]);
    const ownKeys = [...existing.values()].filter((e) => e.workspaceId === this.ws && !e.deleted);
    const limitsOf = await keyRatelimits(
      this.tx,
      ownKeys.map((e) => e.id),
    );

    type Planned = { item: CopyKey; row: KeyUpdate; roleIds: string[]; permissionIds: string[]; seal: boolean };
    const creates: Planned[] = [];
    const updates: Planned[] = [];
    const hashesClaimed = new Map<string, string>();
    for (const item of items) {
      const found = existing.get(item.id);
      const where = standing(found, this.ws);
      if (where !== "free" && where !== "own") {
        out.skipped.push({ id: item.id, reason: where });
        continue;
      }
      const skip = this.keyRefusal(item, found, { roleIds, permissionIds, identityIds });
      if (skip !== undefined) {
        out.skipped.push({ id: item.id, reason: skip });
        continue;
      }
      // The plaintext's hash: stored only on a new or pending key, and only when no other key holds it.
      let hash = hashes.get(item.id) ?? null;
      if (hash !== null) {
        const holder = hashesClaimed.get(hash) ?? holders.get(hash);
        if (holder !== undefined && holder !== item.id) {
          out.skipped.push({ id: item.id, reason: `plaintext: another key (${holder}) has the same key` });
          continue;
        }
        hashesClaimed.set(hash, item.id);
        if (found?.hash != null && found.hash !== hash) hash = null;
      }
      const row = this.keyRow(item, found, found?.hash ?? hash, identityIds);
      const links = {
        roleIds: [...new Set(item.roles ?? [])].map((n) => roleIds.get(n)!),
        permissionIds: [...new Set(item.permissions ?? [])].map((s) => permissionIds.get(s)!),
      };
      // A recoverable key's copy is sealed once, with the key's own hash (never a plaintext another key's hash matches).
      const seal = item.recoverable === true && hash !== null && !found?.encrypted;
      const planned: Planned = Object.assign({ item, row, seal }, links);
      if (found === undefined) creates.push(planned);
      else if (seal || keyDiffers(found, row, links, limitsOf.get(item.id) ?? [], distinctLimits(item.ratelimits))) updates.push(planned);
      else out.unchanged++;
    }

    const newRows = creates.map(({ item, row }) =>
      Object.assign({}, row, { workspaceId: this.ws, apiId: item.apiId, createdAtM: item.createdAt }),
    );
    const inserted = await insertKeys(this.tx, newRows);
    const created = creates.filter((c) => inserted.has(c.item.id));
    if (created.length !== creates.length) throw copyRaced();
    if (updates.length > 0) {
      for (const apiId of new Set(updates.map((u) => u.item.apiId))) {
        requirePermission(this.caller, keyPermission(this.caller.access, this.ws, apiId, "*", "update_key"));
      }
    }
    const updatedIds = await updateKeys(
      this.tx,
      this.ws,
      updates.map((u) => u.row),
      this.now,
    );
    const updated = updates.filter((u) => updatedIds.has(u.item.id));
    if (updated.length !== updates.length) throw copyRaced();
    const written = [...created, ...updated];

    const sealed = written.filter((w) => w.seal && dataKey !== undefined);
    // Inserted whenever it is new, sealed keys or not: the keyring remembers it once the change commits.
    if (dataKey?.newRow) await this.tx.insert(encryptionKeys).values(dataKey.newRow);
    await insertEncryptedCopies(
      this.tx,
      sealed.map((w) => ({
        keyId: w.item.id,
        workspaceId: this.ws,
        encrypted: this.keyring.encrypt(dataKey!, w.item.id, w.item.plaintext!),
        encryptionKeyId: dataKey!.id,
        createdAtM: this.now,
      })),
    );
    await deleteLinksOutside(
      this.tx,
      "keyRoles",
      updated.map((u) => ({ owner: u.item.id, members: u.roleIds })),
    );
    await deleteLinksOutside(
      this.tx,
      "keyPermissions",
      updated.map((u) => ({ owner: u.item.id, members: u.permissionIds })),
    );
    await insertLinks(
      this.tx,
      "keyRoles",
      this.ws,
      written.map((w) => ({ owner: w.item.id, members: w.roleIds })),
      this.now,
    );
    await insertLinks(
      this.tx,
      "keyPermissions",
      this.ws,
      written.map((w) => ({ owner: w.item.id, members: w.permissionIds })),
      this.now,
    );
    await replaceOwnedRatelimits(
      this.tx,
      "key",
      this.ws,
      written.map((w) => ({ owner: w.item.id, limits: ownedLimits(w.item.id, w.item.ratelimits) })),
      this.now,
      () => newId("rl"),
    );
    out.created = created.length;
    out.updated = updated.length;
    for (const w of written) this.target("key", w.item.id);
    const states = await countKeyStates(
      this.tx,
      this.ws,
      items.map((k) => k.id),
    );
    return Object.assign(out, states);
  }

  /** Why a well-formed key cannot be held, naming fields and ids, never a value; undefined when it can. */
  private keyRefusal(
    item: CopyKey,
    found: ExistingKey | undefined,
    known: { roleIds: Map<string, string>; permissionIds: Map<string, string>; identityIds: Map<string, string> },
  ): string | undefined {
    if (!this.liveApis.has(item.apiId)) return `apiId: api ${item.apiId} not found`;
    if (found !== undefined && found.apiId !== item.apiId) return `apiId: the key belongs to api ${found.apiId} in keyhaven`;
    if (item.identityId !== undefined && !known.identityIds.has(item.identityId))
      return `identityId: identity ${item.identityId} not found`;
    const missingRoles = [...new Set(item.roles ?? [])].filter((n) => !known.roleIds.has(n));
    if (missingRoles.length > 0) return `roles not found: ${names(missingRoles)}`;
    const missingPermissions = [...new Set(item.permissions ?? [])].filter((s) => !known.permissionIds.has(s));
    if (missingPermissions.length > 0) return `permissions not found: ${names(missingPermissions)}`;
    if (item.credits && refillWithoutRemaining(item.credits)) return "credits.refill: a refill needs credits.remaining";
    return undefined;
  }

  /**
   * The key's row as the request gives it; `lastRefillAt` kept while the refill is the same; `ownerId` (v1's name
   * for the key's owner) its identity's externalId, as keys.createKey and keys.updateKey set it.
   */
  private keyRow(item: CopyKey, found: ExistingKey | undefined, hash: string | null, externalIds: Map<string, string>): KeyUpdate {
    const refill = item.credits?.refill;
    const refillDay = refill?.interval === "monthly" ? (refill.refillDay ?? 1) : null;
    const refillAmount = refill?.amount ?? null;
    const sameRefill = found !== undefined && found.refillDay === refillDay && found.refillAmount === refillAmount;
    return {
      id: item.id,
      hash,
      start: item.start,
      name: item.name ?? null,
      meta: metaOf(item.meta),
      expires: item.expires !== undefined ? new Date(item.expires) : null,
      remaining: item.credits?.remaining ?? null,
      refillDay,
      refillAmount,
      lastRefillAt: sameRefill ? found.lastRefillAt : refill ? new Date(this.now) : null,
      enabled: item.enabled,
      identityId: item.identityId ?? null,
      ownerId: (item.identityId !== undefined && externalIds.get(item.identityId)) || null,
      createdAtM: item.createdAt,
    };
  }

  async overrides(items: CopyOverride[]): Promise<CopyCounts> {
    const out = counts();
    if (items.length === 0) return out;
    const namespaceNames = [...new Set(items.map((o) => o.namespace))];
    const known = await findNamespaceIdsByName(this.tx, this.ws, namespaceNames);
    const missing = namespaceNames.filter((n) => !known.has(n));
    if (missing.length > 0) {
      await insertNamespaces(
        this.tx,
        missing.map((name) => ({ id: newId("rlns"), workspaceId: this.ws, name, createdAtM: this.now })),
      );
      for (const [name, id] of await findNamespaceIdsByName(this.tx, this.ws, missing)) {
        known.set(name, id);
        this.target("ratelimit_namespace", id, name);
      }
    }
    // Of an override given twice, the last wins.
    const wanted = [...new Map(items.map((o) => [`${o.namespace}\u0000${o.identifier}`, o])).values()];
    const pairs = wanted.map((o) => ({ namespaceId: known.get(o.namespace)!, identifier: o.identifier }));
    const existing = new Map((await findOverrides(this.tx, pairs)).map((e) => [`${e.namespaceId}\u0000${e.identifier}`, e]));
    const rows: {
      id: string;
      workspaceId: string;
      namespaceId: string;
      identifier: string;
      limit: number;
      duration: number;
      createdAtM: number;
    }[] = [];
    for (const o of wanted) {
      const namespaceId = known.get(o.namespace)!;
      const found = existing.get(`${namespaceId}\u0000${o.identifier}`);
      if (found && !found.deleted && found.limit === o.limit && found.duration === o.duration) {
        out.unchanged++;
        continue;
      }
      if (found && !found.deleted) out.updated++;
      else out.created++;
      const id = found?.id ?? newId("rlor");
      rows.push({
        id,
        workspaceId: this.ws,
        namespaceId,
        identifier: o.identifier,
        limit: o.limit,
        duration: o.duration,
        createdAtM: this.now,
      });
      this.target("ratelimit_override", id, o.identifier);
    }
    out.unchanged += items.length - wanted.length;
    await upsertOverrides(this.tx, rows);
    return out;
  }
}

function ownedLimits(owner: string, limits: CopyRatelimit[] | undefined): OwnedRatelimit[] {
  return distinctLimits(limits).map((l) => ({ owner, name: l.name, limit: l.limit, duration: l.duration, autoApply: l.autoApply }));
}

/** Whether the stored key differs from its copy in anything the copy sets. */
function keyDiffers(
  found: ExistingKey,
  row: KeyUpdate,
  links: { roleIds: string[]; permissionIds: string[] },
  limits: readonly CopyRatelimit[],
  wanted: readonly CopyRatelimit[],
): boolean {
  return (
    (found.hash === null && row.hash !== null) ||
    found.start !== row.start ||
    found.name !== row.name ||
    !sameMeta(found.meta, row.meta) ||
    (found.expires?.getTime() ?? null) !== (row.expires?.getTime() ?? null) ||
    found.remaining !== row.remaining ||
    found.refillDay !== row.refillDay ||
    found.refillAmount !== row.refillAmount ||
    found.enabled !== row.enabled ||
    found.identityId !== row.identityId ||
    found.ownerId !== row.ownerId ||
    found.createdAtM !== row.createdAtM ||
    !sameSet(found.roleIds, links.roleIds) ||
    !sameSet(found.permissionIds, links.permissionIds) ||
    !sameRatelimits(limits, wanted)
  );
}
