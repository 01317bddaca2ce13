import { randomInt } from "node:crypto";
import { NotFoundError, PortalRefusedError } from "../../errors.js";
import { hashKey } from "../../crypto/hash.js";
import { newId } from "../../ids.js";
import type { Db } from "../../storage/client.js";
import { findDependencyFailure } from "../../storage/dependency.js";
import {
  findPortal,
  findSessionByCodeHash,
  findSessionByTokenHash,
  insertPortalSession,
  redeemExchangeCode,
  revokePortalSession,
} from "../../storage/portals/portals.repository.js";
import type { PermissionQuery } from "../auth/permissions.query.js";
import type { Caller, Origin } from "../caller.js";
import { hasPermission } from "../principal.js";
import { checkPortalUrl, type PortalServices, portalPermission } from "./portals.manage.js";

/** What a portal session may be granted (upstream's enum); `keys:create` is granted and checked, though no route creates keys yet. */
export const PORTAL_SCOPES = ["keys:read", "keys:create", "keys:reroll", "analytics:read"] as const;
export type PortalScope = (typeof PORTAL_SCOPES)[number];

/** An exchange code is single use and lives 15 minutes; the access token it is exchanged for, 24 hours (upstream's). */
export const EXCHANGE_CODE_TTL_MS = 15 * 60_000;
export const ACCESS_TOKEN_TTL_MS = 24 * 3_600_000;

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** `<prefix>_` and 24 letters and digits from the CSPRNG (uniform: randomInt rejects the biased draws). */
export function portalSecret(prefix: "pst" | "pat"): string {
  let s = `${prefix}_`;
  for (let i = 0; i < 24; i++) s += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return s;
}

const tuple = (apiId: string, action: string): PermissionQuery => ({ or: ["*", `api.*.${action}`, `api.${apiId}.${action}`] });

/**
 * What the root key must hold on an API (a keyspace) to grant `scope` to a portal session: its ceiling at mint time
 * (upstream's scope queries; tuples only, never a URN). Rerolling and creating keys in an API that stores keys
 * encrypted also needs encrypt_key, since the new key gets an encrypted copy.
 */
export function scopeCeiling(scope: PortalScope, apiId: string, storesEncrypted: boolean): PermissionQuery {
  switch (scope) {
    case "keys:read":
      return { and: [tuple(apiId, "read_key"), tuple(apiId, "read_api")] };
    case "keys:create":
    case "keys:reroll":
      return storesEncrypted ? { and: [tuple(apiId, "create_key"), tuple(apiId, "encrypt_key")] } : tuple(apiId, "create_key");
    case "analytics:read":
      return tuple(apiId, "read_analytics");
  }
}

/**
 * The core permissions a portal session's caller holds on its APIs: exactly what its scopes were granted for, so the
 * core's own rules (rerollKey's create_key and encrypt_key, listKeys' read_key) apply to it unchanged.
 */
function permissionsOf(scopes: readonly string[], apiIds: readonly string[]): Set<string> {
  const held = new Set<string>();
  for (const apiId of apiIds) {
    for (const scope of scopes) {
      if (scope === "keys:read") held.add(`api.${apiId}.read_key`).add(`api.${apiId}.read_api`);
      if (scope === "keys:reroll" || scope === "keys:create") held.add(`api.${apiId}.create_key`).add(`api.${apiId}.encrypt_key`);
      if (scope === "analytics:read") held.add(`api.${apiId}.read_analytics`);
    }
  }
  return held;
}

export type CreateSessionInput = {
  portal: string;
  externalId: string;
  scopes: readonly PortalScope[];
  preview?: boolean | undefined;
  returnUrl?: string | undefined;
};

/**
 * Mints a portal session for an end user (`externalId`), as upstream's createSession: the portal by id or slug in the
 * caller's workspace (else not found); the caller must hold create_portal_session on it (else, masked, not found);
 * the portal enabled (else forbidden); every scope within the caller's ceiling on the portal's API (else forbidden,
 * naming the first scope refused). Nothing is written before all pass; the session and its audit entry are one
 * transaction. The answer's URL carries the exchange code, which is stored only as its hash. Only a root key mints.
 */
export async function createPortalSession(
  services: PortalServices,
  caller: Caller,
  input: CreateSessionInput,
  portalBaseUrl: string,
): Promise<{ id: string; url: string }> {
  const portal = await findPortal(services.db, caller.workspaceId, input.portal);
  if (!portal) throw new NotFoundError("portal", input.portal, { kind: "portalNotFound" });
  if (!hasPermission(caller, portalPermission("create_portal_session", portal.id)) || caller.actor.kind !== "root_key") {
    throw new NotFoundError("portal", input.portal, { kind: "portalNotFound" });
  }
  if (!portal.enabled) throw new PortalRefusedError({ kind: "portalDisabled" });
  for (const scope of input.scopes) {
    if (!hasPermission(caller, scopeCeiling(scope, portal.apiId, portal.storeEncryptedKeys))) {
      throw new PortalRefusedError({ kind: "portalScopeNotGrantable", scope });
    }
  }
  const returnUrl = input.returnUrl === "" ? undefined : input.returnUrl;
  if (returnUrl !== undefined) checkPortalUrl("returnUrl", returnUrl, false);

  const code = portalSecret("pst");
  const id = newId("ps");
  const scopes = [...new Set(input.scopes)];
  const now = services.clock.now();
  await services.changes.change(caller, async (tx, record) => {
    await insertPortalSession(tx, {
      id,
      workspaceId: caller.workspaceId,
      portalId: portal.id,
      externalId: input.externalId,
      scopes,
      apiIds: [portal.apiId],
      preview: input.preview ?? false,
      returnUrl: returnUrl ?? null,
      mintedBy: caller.actor.id,
      codeHash: hashKey(code),
      codeExpiresAtM: now + EXCHANGE_CODE_TTL_MS,
      createdAtM: now,
    });
    record({
      event: "portal.create_session",
      targets: [
        { type: "portalSession", id },
        { type: "portal", id: portal.id, name: portal.slug },
      ],
      description: `created portal session for ${input.externalId}`,
      details: { portalId: portal.id, slug: portal.slug, scopes, keyspaceIds: [portal.apiId], preview: input.preview ?? false },
    });
  });
  return { id, url: `${portalBaseUrl.replace(/\/+$/, "")}/?code=${code}` };
}

/**
 * Exchanges a code for an access token valid 24 hours, once: a single conditional update (concurrent exchanges of one
 * code: one wins). An unknown, expired or used code is refused alike. When the outcome of the commit is lost (the
 * store dropped the connection as it committed), the session is read again: if it holds this call's token, the
 * exchange did happen and is answered (a replay of the same exchange recognised); any other redemption is refused.
 */
export async function exchangePortalCode(
  services: PortalServices,
  code: string,
  origin: Origin,
): Promise<{ accessToken: string; expiresAt: number; sessionId: string }> {
  const codeHash = hashKey(code);
  const pending = await findSessionByCodeHash(services.db, codeHash);
  const now = services.clock.now();
  if (!pending || pending.tokenHash !== null || pending.codeExpiresAtM <= now) throw new PortalRefusedError({ kind: "portalCodeInvalid" });
  const accessToken = portalSecret("pat");
  const tokenHash = hashKey(accessToken);
  const expiresAt = now + ACCESS_TOKEN_TTL_MS;
  const caller = sessionActorCaller(pending, origin);
  try {
    const redeemed = await services.changes.change(caller, async (tx, record) => {
      const row = await redeemExchangeCode(tx, { codeHash, tokenHash, now, expiresAtM: expiresAt });
      if (row) {
        record({
          event: "portal.exchange_code",
          targets: [{ type: "portalSession", id: row.id }],
          description: `exchanged the code of portal session ${row.id}`,
        });
      }
      return row;
    });
    if (!redeemed) throw new PortalRefusedError({ kind: "portalCodeInvalid" });
  } catch (err) {
    if (!(findDependencyFailure(err) && (await exchangedBy(services.db, codeHash, tokenHash)))) throw err;
  }
  return { accessToken, expiresAt, sessionId: pending.id };
}

/** Whether the session of `codeHash` holds the token of `tokenHash`: the exchange that minted it has committed. */
export async function exchangedBy(db: Db, codeHash: string, tokenHash: string): Promise<boolean> {
  const row = await findSessionByCodeHash(db, codeHash).catch(() => undefined);
  return row !== undefined && row.tokenHash === tokenHash;
}

/**
 * The id of the session an exchange code belongs to, whatever its state (the portal page recognises a reload of its
 * own code's URL after the exchange: the code is refused, but the cookie it set is that session's). Undefined for
 * an unknown code.
 */
export async function portalSessionIdOfCode(db: Db, code: string): Promise<string | undefined> {
  if (code === "") return undefined;
  return (await findSessionByCodeHash(db, hashKey(code)))?.id;
}

/** A live portal session, as its access token resolves: who it is for, what it may do, and its portal's looks. */
export type PortalSession = {
  readonly id: string;
  readonly workspaceId: string;
  readonly portalId: string;
  readonly externalId: string;
  readonly scopes: readonly PortalScope[];
  readonly apiIds: readonly string[];
  readonly preview: boolean;
  /** The session's return link, else its portal's. */
  readonly returnUrl: string | null;
  readonly expiresAtM: number;
  readonly portal: {
    id: string;
    slug: string;
    name: string;
    title: string | null;
    accentColor: string | null;
    logoUrl: string | null;
    updatedAtM: number | null;
  };
};

/**
 * The session of an access token, or portalSessionInvalid for every reason it does not work, alike: unknown, expired
 * (at the current clock: nothing extends it), revoked (signed out; its identity deleted), its root key deleted, its
 * portal deleted or disabled, its API deleted, its workspace disabled. An empty token is portalTokenMissing.
 */
export async function resolvePortalSession(services: { db: Db; clock: { now(): number } }, token: string): Promise<PortalSession> {
  if (token === "") throw new PortalRefusedError({ kind: "portalTokenMissing" });
  const row = await findSessionByTokenHash(services.db, hashKey(token));
  const now = services.clock.now();
  if (
    !row ||
    row.revokedAtM !== null ||
    row.tokenExpiresAtM === null ||
    row.tokenExpiresAtM <= now ||
    !row.portal.enabled ||
    !row.apiLive ||
    !row.workspaceEnabled
  ) {
    throw new PortalRefusedError({ kind: "portalSessionInvalid" });
  }
  return {
    id: row.id,
    workspaceId: row.workspaceId,
    portalId: row.portalId,
    externalId: row.externalId,
    scopes: row.scopes as PortalScope[],
    apiIds: row.apiIds,
    preview: row.preview,
    returnUrl: row.returnUrl ?? row.portal.returnUrl,
    expiresAtM: row.tokenExpiresAtM,
    portal: {
      id: row.portal.id,
      slug: row.portal.slug,
      name: row.portal.name,
      title: row.portal.brandingTitle,
      accentColor: row.portal.accentColor,
      logoUrl: row.portal.logoUrl,
      updatedAtM: row.portal.updatedAtM,
    },
  };
}

/** The return link of an ended session, if the token ever named one (the portal page sends the user back there). */
export async function returnUrlOfToken(db: Db, token: string): Promise<string | undefined> {
  if (token === "") return undefined;
  const row = await findSessionByTokenHash(db, hashKey(token)).catch(() => undefined);
  return row?.returnUrl ?? row?.portal.returnUrl ?? undefined;
}

function sessionActorCaller(session: { id: string; workspaceId: string }, origin: Origin): Caller {
  return {
    workspaceId: session.workspaceId,
    permissions: new Set(),
    actor: { kind: "portal_session", id: session.id, name: "portal session" },
    // A portal session's lookups answer what it may not see as missing, never as forbidden (no probing).
    access: { urnGrants: false, check: "beforeLookup", denied: "notFound" },
    origin,
  };
}

/**
 * The caller of a portal session's request: the session as actor, its workspace, and the core permissions of its
 * scopes on its APIs only (permissionsOf); what it may see of them is narrowed further by the portal's own rules
 * (its end user's keys only: portals.access.ts).
 */
export function portalSessionCaller(session: PortalSession, origin: Origin): Caller {
  return Object.assign(sessionActorCaller(session, origin), {
    permissions: permissionsOf(session.scopes, session.apiIds),
    actor: { kind: "portal_session" as const, id: session.id, name: `portal session for ${session.externalId}` },
  });
}

/** Whether the session was granted `scope` (an exact match, as upstream's: no scope implies another). */
export function requireScope(session: PortalSession, scope: PortalScope): void {
  if (!session.scopes.includes(scope)) throw new PortalRefusedError({ kind: "portalScopeMissing", scope });
}

/** Ends a session now (the portal page's sign-out). */
export async function signOutPortalSession(services: PortalServices, session: PortalSession, origin: Origin): Promise<void> {
  await services.changes.change(portalSessionCaller(session, origin), async (tx, record) => {
    if (await revokePortalSession(tx, session.id, services.clock.now())) {
      record({
        event: "portal.sign_out",
        targets: [{ type: "portalSession", id: session.id }],
        description: `signed out of portal session ${session.id}`,
      });
    }
  });
}
