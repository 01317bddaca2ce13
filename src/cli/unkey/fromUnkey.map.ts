/**
 * Hosted Unkey's records (unkey.schemas.ts, as Unkey's v2 API answers them) as the items of keyhaven's
 * POST /v2/keyhaven.copyFromUnkey (its contract: the body's sections `apis`, `permissions`, `roles`, `identities`,
 * `keys`, `overrides`). Pure functions: no request, no state.
 */
import type {
  UnkeyApi,
  UnkeyIdentity,
  UnkeyKey,
  UnkeyOverride,
  UnkeyPermission,
  UnkeyRatelimit,
  UnkeyRole,
} from "../../unkey/unkey.schemas.js";

export type CopyRatelimit = { name: string; limit: number; duration: number; autoApply: boolean };
export type CopyApi = { id: string; name: string };
export type CopyPermission = { id: string; name: string; slug: string; description?: string };
export type CopyRole = { id: string; name: string; description?: string; permissions: string[] };
export type CopyIdentity = { id: string; externalId: string; meta?: Record<string, unknown>; ratelimits?: CopyRatelimit[] };
export type CopyKey = {
  id: string;
  apiId: string;
  start: string;
  createdAt: number;
  enabled: boolean;
  name?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  credits?: { remaining: number | null; refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number } };
  ratelimits?: CopyRatelimit[];
  roles?: string[];
  permissions?: string[];
  identityId?: string;
  plaintext?: string;
  recoverable?: true;
};
export type CopyOverride = { namespace: string; identifier: string; limit: number; duration: number };

/** A section of the route's body, in the order the route processes them (and the CLI sends them). */
export type Section = "apis" | "permissions" | "roles" | "identities" | "keys" | "overrides";
export const SECTIONS: readonly Section[] = ["apis", "permissions", "roles", "identities", "keys", "overrides"];

export type CopyItem = CopyApi | CopyPermission | CopyRole | CopyIdentity | CopyKey | CopyOverride;

const ratelimits = (limits: UnkeyRatelimit[] | undefined): CopyRatelimit[] | undefined =>
  limits?.map((r) => ({ name: r.name, limit: r.limit, duration: r.duration, autoApply: r.autoApply }));

export const toCopyApi = (api: UnkeyApi): CopyApi => ({ id: api.id, name: api.name });

export function toCopyPermission(p: UnkeyPermission): CopyPermission {
  return { id: p.id, name: p.name, slug: p.slug, ...(p.description !== undefined && { description: p.description }) };
}

export function toCopyRole(role: UnkeyRole): CopyRole {
  return {
    id: role.id,
    name: role.name,
    ...(role.description !== undefined && { description: role.description }),
    permissions: (role.permissions ?? []).map((p) => p.slug),
  };
}

export function toCopyIdentity(identity: UnkeyIdentity): CopyIdentity {
  const limits = ratelimits(identity.ratelimits);
  return {
    id: identity.id,
    externalId: identity.externalId,
    ...(identity.meta !== undefined && { meta: identity.meta }),
    ...(limits !== undefined && { ratelimits: limits }),
  };
}

/**
 * A key. Unkey answers a key's `permissions` as every slug it has, directly and through its roles; the route's
 * `permissions` are the DIRECT ones: those its roles do not give (`roleSlugs`: each role name's permission slugs).
 * A plaintext Unkey returned makes the key verifiable at once, and recoverable (Unkey only returns a plaintext it
 * stores encrypted).
 */
export function toCopyKey(key: UnkeyKey, apiId: string, roleSlugs: ReadonlyMap<string, readonly string[]>): CopyKey {
  const roles = key.roles ?? [];
  const throughRoles = new Set(roles.flatMap((r) => roleSlugs.get(r) ?? []));
  const direct = (key.permissions ?? []).filter((p) => !throughRoles.has(p));
  const limits = ratelimits(key.ratelimits);
  const out: CopyKey = { id: key.keyId, apiId, start: key.start, createdAt: key.createdAt, enabled: key.enabled };
  // keyhaven's names are 1 character or more: Unkey's empty name is no name.
  if (key.name !== undefined && key.name !== "") out.name = key.name;
  if (key.meta !== undefined) out.meta = key.meta;
  if (key.expires !== undefined) out.expires = key.expires;
  if (key.credits !== undefined) {
    const { remaining, refill } = key.credits;
    out.credits = { remaining };
    if (refill) {
      out.credits.refill = { interval: refill.interval, amount: refill.amount };
      if (refill.refillDay !== undefined) out.credits.refill.refillDay = refill.refillDay;
    }
  }
  if (limits !== undefined) out.ratelimits = limits;
  out.roles = [...roles];
  out.permissions = direct;
  if (key.identity) out.identityId = key.identity.id;
  if (key.plaintext !== undefined && key.plaintext !== "") {
    out.plaintext = key.plaintext;
    out.recoverable = true;
  }
  return out;
}

export const toCopyOverride = (namespace: string, o: UnkeyOverride): CopyOverride => ({
  namespace,
  identifier: o.identifier,
  limit: o.limit,
  duration: o.duration,
});

/** The id an item is known by in the route's answer (an override by namespace and identifier). */
export function itemId(section: Section, item: CopyItem): string {
  if (section === "overrides") {
    const o = item as CopyOverride;
    return `${o.namespace}/${o.identifier}`;
  }
  return (item as { id: string }).id;
}
