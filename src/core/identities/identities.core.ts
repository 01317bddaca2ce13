import { describeQuery, identityPermission, keyPermission, type PermissionQuery } from "../auth/permissions.query.js";
import { hasPermission, requirePermission } from "../principal.js";
import { type Db, isUniqueViolation } from "../../storage/client.js";
import { ConflictError, InvalidInputError, NotFoundError, PermissionDeniedError } from "../../errors.js";
import {
  deleteIdentity as removeIdentity,
  findIdentity,
  findIdentityByRef,
  type IdentityRatelimit,
  type IdentityRatelimitInput,
  type IdentityRow,
  identityRatelimits,
  type IdentityKeyRow,
  listIdentitiesFrom,
  listKeysOfIdentityFrom,
  insertIdentity,
  listIdentitiesPage,
  updateIdentity as writeIdentity,
} from "../../storage/identities/identities.repository.js";
import type { AuditTarget } from "../../storage/schema.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import type { Principal } from "../principal.js";
import type { Clock } from "../../clock.js";

/** Every change goes through the write gate (`changes`), which records it in the audit log in its own transaction. */
type IdentityServices = { db: Db; clock: Clock; changes: WriteGate };
type Meta = Record<string, unknown>;

export type Identity = { id: string; externalId: string; meta: Meta; ratelimits: IdentityRatelimit[] };

/** v1's longest meta, as JSON, an identity keeps ("less than 64k characters when json encoded"). */
export const MAX_IDENTITY_META_JSON = 64_000;

/** Refuses meta whose JSON encoding is longer than `max` characters (each wire protocol has its own limit). */
export function assertMetaSize(value: Meta | undefined, max: number): void {
  if (value === undefined) return;
  const size = JSON.stringify(value).length;
  if (size > max) {
    throw new InvalidInputError({ kind: "metaTooLarge", size, max });
  }
}

/** An identity's rate limits are named once each: the second of a name in one request is a conflict. */
function assertDistinctRatelimitNames(ratelimits: readonly IdentityRatelimitInput[] | undefined): void {
  const names = new Set<string>();
  for (const r of ratelimits ?? []) {
    if (names.has(r.name)) throw new ConflictError("ratelimit", { kind: "ratelimitNameRepeated", name: r.name });
    names.add(r.name);
  }
}

/** Either an identityId or an externalId names an identity; the input alone says which (checked before auth in v1). */
export function assertIdentitySelector(input: { identityId?: string | undefined; externalId?: string | undefined }): void {
  if (input.identityId === undefined && input.externalId === undefined) {
    throw new InvalidInputError({ kind: "identitySelectorMissing" });
  }
}

/** Where the wire protocols' rules for identities differ, each adapter says which it follows (no default). */
export type IdentityRules = {
  /** The longest meta, as JSON. */
  readonly maxMetaJson: number;
};

/**
 * The identity permission `action`: the tuples given and, when the caller's access policy grants by URN (contract §2
 * rows 21–25), the URN of any identity.
 */
const identityQuery = (caller: Caller, action: string, ...tuples: string[]): PermissionQuery =>
  identityPermission(caller.access, caller.workspaceId, ["*", ...tuples], action);

const identityTarget = (row: { id: string; externalId: string }): AuditTarget => ({
  type: "identity",
  id: row.id,
  name: row.externalId,
});

/** The names of the fields a create or an update was given (never their values: meta stays out of the audit log). */
const fieldsGiven = (input: { meta?: Meta | undefined; ratelimits?: readonly IdentityRatelimitInput[] | undefined }) => ({
  fields: [...(input.meta !== undefined ? ["meta"] : []), ...(input.ratelimits !== undefined ? ["ratelimits"] : [])],
});

const identityNotFound = (idOrExternalId: string | undefined) => new NotFoundError("identity", idOrExternalId ?? "");

/** Creates an identity; its externalId is unique in the workspace (ConflictError otherwise). Returns its id. */
export async function createIdentity(
  services: IdentityServices,
  caller: Caller,
  input: { externalId: string; meta?: Meta | undefined; ratelimits?: IdentityRatelimitInput[] | undefined },
  rules: IdentityRules,
): Promise<string> {
  requirePermission(caller, identityQuery(caller, "create_identity", "identity.*.create_identity"));
  assertMetaSize(input.meta, rules.maxMetaJson);
  assertDistinctRatelimitNames(input.ratelimits);
  try {
    return await services.changes.change(caller, async (tx, record) => {
      const id = await insertIdentity(
        tx,
        {
          workspaceId: caller.workspaceId,
          externalId: input.externalId,
          meta: input.meta,
          ratelimits: input.ratelimits ?? [],
        },
        services.clock.now(),
      );
      record({
        event: "identity.create",
        targets: [identityTarget({ id, externalId: input.externalId })],
        description: `created identity ${id}`,
        details: fieldsGiven(input),
      });
      return id;
    });
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new ConflictError("identity", { kind: "identityExists", externalId: input.externalId });
    }
    throw err;
  }
}

async function withRatelimits(db: Db, row: { id: string; externalId: string }, meta: Meta): Promise<Identity> {
  const ratelimits = (await identityRatelimits(db, [row.id])).get(row.id) ?? [];
  return { id: row.id, externalId: row.externalId, meta, ratelimits };
}

/** An identity by id or by externalId, with its rate limits. */
export async function getIdentity(
  services: IdentityServices,
  caller: Principal,
  input: { identityId?: string | undefined; externalId?: string | undefined },
): Promise<Identity> {
  assertIdentitySelector(input);
  const anyIdentity: PermissionQuery = { or: ["*", "identity.*.read_identity"] };
  // By id the permission is known before the lookup. By externalId it is too for `*` and identity.*; a caller
  // with read_identity on some identities only learns neither the id behind the externalId nor whether it exists.
  if (input.identityId !== undefined) {
    requirePermission(caller, { or: [...anyIdentity.or, `identity.${input.identityId}.read_identity`] });
  }
  const row = await findIdentity(
    services.db,
    caller.workspaceId,
    input.identityId !== undefined ? { identityId: input.identityId } : { externalId: input.externalId! },
  );
  const byExternalId = row && input.identityId === undefined ? [`identity.${row.id}.read_identity`] : [];
  if (input.identityId === undefined && !hasPermission(caller, { or: [...anyIdentity.or, ...byExternalId] })) {
    throw new PermissionDeniedError(
      `${describeQuery(anyIdentity)} or read_identity on the identity with externalId ${JSON.stringify(input.externalId)}`,
      [...caller.permissions],
    );
  }
  if (!row) throw identityNotFound(input.identityId ?? input.externalId);
  return withRatelimits(services.db, row, (row.meta as Meta | null) ?? {});
}

/** A page of an environment's identities by id after `cursor`, the cursor of the next page when one may exist, the total. */
export async function listIdentities(
  services: IdentityServices,
  caller: Principal,
  input: { environment: string; limit: number; cursor?: string | undefined },
): Promise<{ identities: Omit<Identity, "meta">[]; cursor?: string; total: number }> {
  requirePermission(caller, { or: ["*", "identity.*.read_identity", `identity.${input.environment}.read_identity`] });
  const { rows, total } = await listIdentitiesPage(services.db, { workspaceId: caller.workspaceId, ...input });
  const rls = await identityRatelimits(
    services.db,
    rows.map((r) => r.id),
  );
  return {
    identities: rows.map((r) => ({ id: r.id, externalId: r.externalId, ratelimits: rls.get(r.id) ?? [] })),
    // Only when another page may exist: a short page is the last one.
    ...(rows.length === input.limit && { cursor: rows[rows.length - 1]!.id }),
    total,
  };
}

/**
 * Replaces an identity's meta (when given) and reconciles its rate limits by name (when given); the identity is
 * named by id, else by externalId in an environment.
 */
export async function updateIdentity(
  services: IdentityServices,
  caller: Caller,
  input: {
    identityId?: string | undefined;
    externalId?: string | undefined;
    environment: string;
    meta?: Meta | undefined;
    ratelimits?: IdentityRatelimitInput[] | undefined;
  },
  rules: IdentityRules,
): Promise<Identity> {
  requirePermission(caller, { or: ["*", "identity.*.update_identity"] });
  assertIdentitySelector(input);
  assertMetaSize(input.meta, rules.maxMetaJson);
  assertDistinctRatelimitNames(input.ratelimits);
  const row = await findIdentity(
    services.db,
    caller.workspaceId,
    input.identityId !== undefined ? { identityId: input.identityId } : { externalId: input.externalId!, environment: input.environment },
  );
  if (!row) throw identityNotFound(input.identityId ?? input.externalId);
  return writeAndRecord(services, caller, row, input, input.identityId ?? input.externalId);
}

/**
 * Writes an update of the identity `row` through the write gate (identity.update, the names of the fields given) and
 * answers the identity as stored afterwards, read in the same transaction. Deleted since it was looked up: not found
 * (`ref`, as the caller named it), and nothing recorded.
 */
function writeAndRecord(
  services: IdentityServices,
  caller: Caller,
  row: IdentityRow,
  input: { meta?: Meta | undefined; ratelimits?: IdentityRatelimitInput[] | undefined },
  ref: string | undefined,
): Promise<Identity> {
  return services.changes.change(caller, async (tx, record) => {
    const written = await writeIdentity(
      tx,
      { workspaceId: caller.workspaceId, identityId: row.id, meta: input.meta, ratelimits: input.ratelimits },
      services.clock.now(),
    );
    if (!written) throw identityNotFound(ref);
    record({
      event: "identity.update",
      targets: [identityTarget(row)],
      description: `updated identity ${row.id}`,
      details: fieldsGiven(input),
    });
    return withRatelimits(tx, row, input.meta ?? (row.meta as Meta | null) ?? {});
  });
}

/** Deletes the identity through the write gate (identity.delete); false when there was none to delete. */
function removeAndRecord(services: IdentityServices, caller: Caller, identityId: string): Promise<boolean> {
  return services.changes.change(caller, async (tx, record) => {
    const removed = await removeIdentity(tx, caller.workspaceId, identityId);
    if (removed) record({ event: "identity.delete", targets: [identityTarget(removed)], description: `deleted identity ${removed.id}` });
    return removed !== undefined;
  });
}

/** Hard-deletes an identity and its rate limits; its keys keep working without an identity. */
export async function deleteIdentity(services: IdentityServices, caller: Caller, identityId: string): Promise<void> {
  requirePermission(caller, { or: ["*", "identity.*.delete_identity", `identity.${identityId}.delete_identity`] });
  if (!(await removeAndRecord(services, caller, identityId))) throw identityNotFound(identityId);
}

/**
 * v2's ways of naming and listing identities: one string that is the identity's id or else its externalId; pages
 * by id from an id on (inclusive); permission per identity read.
 */

const readIdentity = (caller: Caller, id: string): PermissionQuery =>
  identityQuery(caller, "read_identity", "identity.*.read_identity", `identity.${id}.read_identity`);

/** An identity by id or externalId; NotFoundError before the permission check (which names the identity's id). */
export async function getIdentityByRef(services: IdentityServices, caller: Caller, ref: string): Promise<Identity> {
  const row = await findIdentityByRef(services.db, caller.workspaceId, ref);
  if (!row) throw identityNotFound(ref);
  requirePermission(caller, readIdentity(caller, row.id));
  return withRatelimits(services.db, row, (row.meta as Meta | null) ?? {});
}

/**
 * A page of the caller's identities by id from `fromId` on, matching `search` (id or externalId), and the id the
 * next page starts from when there is one; the caller must be allowed to read every identity of the page
 * (PermissionDeniedError for the first it may not).
 */
export async function listIdentitiesByPage(
  services: IdentityServices,
  caller: Caller,
  page: { fromId?: string | undefined; limit: number; search?: string | undefined },
): Promise<{ identities: Identity[]; nextId?: string }> {
  const found = await listIdentitiesFrom(services.db, caller.workspaceId, { ...page, limit: page.limit + 1 });
  const rows = found.slice(0, page.limit);
  for (const row of rows) requirePermission(caller, readIdentity(caller, row.id));
  const rls = await identityRatelimits(
    services.db,
    rows.map((r) => r.id),
  );
  const identities = rows.map((r) => ({
    id: r.id,
    externalId: r.externalId,
    meta: (r.meta as Meta | null) ?? {},
    ratelimits: rls.get(r.id) ?? [],
  }));
  return { identities, ...(found.length > page.limit && { nextId: found[page.limit]!.id }) };
}

/** Updates an identity named by id or externalId (updateIdentity's rules); answers it as stored afterwards. */
export async function updateIdentityByRef(
  services: IdentityServices,
  caller: Caller,
  input: { identity: string; meta?: Meta | undefined; ratelimits?: IdentityRatelimitInput[] | undefined },
  rules: IdentityRules,
): Promise<Identity> {
  requirePermission(caller, identityQuery(caller, "update_identity", "identity.*.update_identity"));
  assertDistinctRatelimitNames(input.ratelimits);
  assertMetaSize(input.meta, rules.maxMetaJson);
  const row = await findIdentityByRef(services.db, caller.workspaceId, input.identity);
  if (!row) throw identityNotFound(input.identity);
  return writeAndRecord(services, caller, row, input, input.identity);
}

/** Deletes an identity named by id or externalId (deleteIdentity's rules). */
export async function deleteIdentityByRef(services: IdentityServices, caller: Caller, ref: string): Promise<void> {
  requirePermission(caller, identityQuery(caller, "delete_identity", "identity.*.delete_identity"));
  const row = await findIdentityByRef(services.db, caller.workspaceId, ref);
  if (!row || !(await removeAndRecord(services, caller, row.id))) throw identityNotFound(ref);
}

/**
 * A page of an identity's live keys by id from `fromId` on (inclusive), and the id the next page starts from when
 * there is one: the identity as getIdentityByRef reads it (not found, or read_identity), then read_key on every API
 * the page's keys belong to (PermissionDeniedError for the first it may not).
 */
export async function listKeysOfIdentity(
  services: IdentityServices,
  caller: Caller,
  ref: string,
  page: { fromId?: string | undefined; limit: number },
): Promise<{ identity: Identity; keys: IdentityKeyRow[]; nextId?: string }> {
  const identity = await getIdentityByRef(services, caller, ref);
  const found = await listKeysOfIdentityFrom(services.db, caller.workspaceId, identity.id, { ...page, limit: page.limit + 1 });
  const keys = found.slice(0, page.limit);
  for (const apiId of new Set(keys.map((k) => k.apiId))) {
    requirePermission(caller, keyPermission(caller.access, caller.workspaceId, apiId, null, "read_key"));
  }
  return { identity, keys, ...(found.length > page.limit && { nextId: found[page.limit]!.id }) };
}
