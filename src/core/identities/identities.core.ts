import type { PermissionDialect } from "../auth/permissions.query.js";
import { describeQuery, identityPermission, type PermissionQuery } from "../auth/permissions.query.js";
import { hasPermission, requirePermission } from "../principal.js";
import { type Db, isUniqueViolation } from "../../storage/client.js";
import { ConflictError, InvalidInputError, NotFoundError, PermissionDeniedError } from "../../errors.js";
import {
  deleteIdentity as removeIdentity,
  findIdentity,
  findIdentityByRef,
  type IdentityRatelimit,
  type IdentityRatelimitInput,
  identityRatelimits,
  listIdentitiesFrom,
  insertIdentity,
  listIdentitiesPage,
  updateIdentity as writeIdentity,
} from "../../storage/identities/identities.repository.js";
import type { Principal } from "../principal.js";
import type { Clock } from "../../clock.js";

type IdentityServices = { db: Db; clock: Clock };
type Meta = Record<string, unknown>;

export type Identity = { id: string; externalId: string; meta: Meta; ratelimits: IdentityRatelimit[] };

/** The longest meta, as JSON, an identity keeps (v1: "less than 64k characters when json encoded"). */
export const MAX_IDENTITY_META_JSON = 64_000;

/**
 * Refuses meta whose JSON encoding is longer than `max` characters (v1's MAX_IDENTITY_META_JSON by default; a wire
 * protocol with another limit passes its own).
 */
export function assertMetaSize(value: Meta | undefined, max = MAX_IDENTITY_META_JSON): void {
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

/** Where the wire protocols' rules for identities differ, each adapter says which it follows. */
export type IdentityRules = {
  /** The longest meta, as JSON (default MAX_IDENTITY_META_JSON, v1's). */
  maxMetaJson?: number;
  /** Whether the identity permissions may also be granted by the URN of any identity (v2, contract §2 rows 21–25). */
  permissionDialect?: PermissionDialect;
};

/** The identity permission `action` as `rules` ask for it: the tuples given, and in v2 the URN. */
const identityQuery = (caller: Principal, rules: IdentityRules, action: string, ...tuples: string[]): PermissionQuery =>
  identityPermission({ urnGrants: (rules.permissionDialect ?? "v1") === "v2" }, caller.workspaceId, ["*", ...tuples], action);

const identityNotFound = (idOrExternalId: string | undefined) => new NotFoundError("identity", idOrExternalId ?? "");

/** Creates an identity; its externalId is unique in the workspace (ConflictError otherwise). Returns its id. */
export async function createIdentity(
  services: IdentityServices,
  caller: Principal,
  input: { externalId: string; meta?: Meta | undefined; ratelimits?: IdentityRatelimitInput[] | undefined },
  rules: IdentityRules = {},
): Promise<string> {
  requirePermission(caller, identityQuery(caller, rules, "create_identity", "identity.*.create_identity"));
  assertMetaSize(input.meta, rules.maxMetaJson);
  assertDistinctRatelimitNames(input.ratelimits);
  try {
    return await insertIdentity(
      services.db,
      {
        workspaceId: caller.workspaceId,
        externalId: input.externalId,
        meta: input.meta,
        ratelimits: input.ratelimits ?? [],
      },
      services.clock.now(),
    );
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
  caller: Principal,
  input: {
    identityId?: string | undefined;
    externalId?: string | undefined;
    environment: string;
    meta?: Meta | undefined;
    ratelimits?: IdentityRatelimitInput[] | undefined;
  },
): Promise<Identity> {
  requirePermission(caller, { or: ["*", "identity.*.update_identity"] });
  assertIdentitySelector(input);
  assertMetaSize(input.meta);
  assertDistinctRatelimitNames(input.ratelimits);
  const row = await findIdentity(
    services.db,
    caller.workspaceId,
    input.identityId !== undefined ? { identityId: input.identityId } : { externalId: input.externalId!, environment: input.environment },
  );
  if (!row) throw identityNotFound(input.identityId ?? input.externalId);
  await writeIdentity(
    services.db,
    {
      workspaceId: caller.workspaceId,
      identityId: row.id,
      meta: input.meta,
      ratelimits: input.ratelimits,
    },
    services.clock.now(),
  );
  return withRatelimits(services.db, row, input.meta ?? (row.meta as Meta | null) ?? {});
}

/** Hard-deletes an identity and its rate limits; its keys keep working without an identity. */
export async function deleteIdentity(services: IdentityServices, caller: Principal, identityId: string): Promise<void> {
  requirePermission(caller, { or: ["*", "identity.*.delete_identity", `identity.${identityId}.delete_identity`] });
  if (!(await removeIdentity(services.db, caller.workspaceId, identityId))) throw identityNotFound(identityId);
}

/**
 * v2's ways of naming and listing identities: one string that is the identity's id or else its externalId; pages
 * by id from an id on (inclusive); permission per identity read.
 */

const readIdentity = (caller: Principal, rules: IdentityRules, id: string): PermissionQuery =>
  identityQuery(caller, rules, "read_identity", "identity.*.read_identity", `identity.${id}.read_identity`);

/** An identity by id or externalId; NotFoundError before the permission check (which names the identity's id). */
export async function getIdentityByRef(
  services: IdentityServices,
  caller: Principal,
  ref: string,
  rules: IdentityRules = {},
): Promise<Identity> {
  const row = await findIdentityByRef(services.db, caller.workspaceId, ref);
  if (!row) throw identityNotFound(ref);
  requirePermission(caller, readIdentity(caller, rules, row.id));
  return withRatelimits(services.db, row, (row.meta as Meta | null) ?? {});
}

/**
 * A page of the caller's identities by id from `fromId` on, matching `search` (id or externalId), and the id the
 * next page starts from when there is one; the caller must be allowed to read every identity of the page
 * (PermissionDeniedError for the first it may not).
 */
export async function listIdentitiesByPage(
  services: IdentityServices,
  caller: Principal,
  page: { fromId?: string | undefined; limit: number; search?: string | undefined },
  rules: IdentityRules = {},
): Promise<{ identities: Identity[]; nextId?: string }> {
  const found = await listIdentitiesFrom(services.db, caller.workspaceId, { ...page, limit: page.limit + 1 });
  const rows = found.slice(0, page.limit);
  for (const row of rows) requirePermission(caller, readIdentity(caller, rules, row.id));
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
  caller: Principal,
  input: { identity: string; meta?: Meta | undefined; ratelimits?: IdentityRatelimitInput[] | undefined },
  rules: IdentityRules = {},
): Promise<Identity> {
  requirePermission(caller, identityQuery(caller, rules, "update_identity", "identity.*.update_identity"));
  assertDistinctRatelimitNames(input.ratelimits);
  assertMetaSize(input.meta, rules.maxMetaJson);
  const row = await findIdentityByRef(services.db, caller.workspaceId, input.identity);
  if (!row) throw identityNotFound(input.identity);
  await writeIdentity(
    services.db,
    { workspaceId: caller.workspaceId, identityId: row.id, meta: input.meta, ratelimits: input.ratelimits },
    services.clock.now(),
  );
  return withRatelimits(services.db, row, input.meta ?? (row.meta as Meta | null) ?? {});
}

/** Deletes an identity named by id or externalId (deleteIdentity's rules). */
export async function deleteIdentityByRef(
  services: IdentityServices,
  caller: Principal,
  ref: string,
  rules: IdentityRules = {},
): Promise<void> {
  requirePermission(caller, identityQuery(caller, rules, "delete_identity", "identity.*.delete_identity"));
  const row = await findIdentityByRef(services.db, caller.workspaceId, ref);
  if (!row || !(await removeIdentity(services.db, caller.workspaceId, row.id))) throw identityNotFound(ref);
}
