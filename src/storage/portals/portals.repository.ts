import { and, asc, eq, gte, isNull, or, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { isStorableText } from "../lookupText.js";
import { apis, portalSessions, portals, workspaces } from "../schema.js";

export type PortalRow = typeof portals.$inferSelect;
export type PortalSessionRow = typeof portalSessions.$inferSelect;

export async function insertPortal(tx: Db, row: typeof portals.$inferInsert): Promise<void> {
  await tx.insert(portals).values(row);
}

/** The live portal of the workspace named by id or by slug (upstream: two seeks), with its API's encryption setting. */
export async function findPortal(
  db: Db,
  workspaceId: string,
  idOrSlug: string,
): Promise<(PortalRow & { storeEncryptedKeys: boolean }) | undefined> {
  if (!isStorableText(idOrSlug)) return undefined;
  const [row] = await db
    .select({ portal: portals, storeEncryptedKeys: apis.storeEncryptedKeys })
    .from(portals)
    .innerJoin(apis, and(eq(apis.id, portals.apiId), isNull(apis.deletedAtM)))
    .where(and(eq(portals.workspaceId, workspaceId), or(eq(portals.id, idOrSlug), eq(portals.slug, idOrSlug))))
    // An id and another portal's slug can be the same text only if a slug looks like an id: the id wins.
    .orderBy(sql`(${portals.id} = ${idOrSlug}) desc`)
    .limit(1);
  return row && Object.assign(row.portal, { storeEncryptedKeys: row.storeEncryptedKeys });
}

/** The portal of an API, if it has one. */
export async function findPortalOfApi(db: Db, workspaceId: string, apiId: string): Promise<PortalRow | undefined> {
  if (!isStorableText(apiId)) return undefined;
  const [row] = await db
    .select()
    .from(portals)
    .where(and(eq(portals.workspaceId, workspaceId), eq(portals.apiId, apiId)));
  return row;
}

/** A page of the workspace's portals by id (from `fromId`, inclusive), optionally only an API's; `limit` rows. */
export async function listPortals(
  db: Db,
  workspaceId: string,
  filter: { apiId?: string | undefined; fromId?: string | undefined; limit: number },
): Promise<PortalRow[]> {
  if (filter.apiId !== undefined && !isStorableText(filter.apiId)) return [];
  return db
    .select()
    .from(portals)
    .innerJoin(apis, and(eq(apis.id, portals.apiId), isNull(apis.deletedAtM)))
    .where(
      and(
        eq(portals.workspaceId, workspaceId),
        filter.apiId === undefined ? undefined : eq(portals.apiId, filter.apiId),
        filter.fromId === undefined ? undefined : gte(portals.id, filter.fromId),
      ),
    )
    .orderBy(asc(portals.id))
    .limit(filter.limit)
    .then((rows) => rows.map((r) => r.portals));
}

/** Changes a portal's columns; the row as it now is, or undefined when there is none. */
export async function updatePortal(
  tx: Db,
  workspaceId: string,
  portalId: string,
  set: Partial<Omit<typeof portals.$inferInsert, "id" | "workspaceId" | "apiId" | "createdAtM">>,
): Promise<PortalRow | undefined> {
  const [row] = await tx
    .update(portals)
    .set(set)
    .where(and(eq(portals.workspaceId, workspaceId), eq(portals.id, portalId)))
    .returning();
  return row;
}

/** Deletes a portal (its sessions with it: cascade); whether there was one. */
export async function deletePortal(tx: Db, workspaceId: string, portalId: string): Promise<boolean> {
  const rows = await tx
    .delete(portals)
    .where(and(eq(portals.workspaceId, workspaceId), eq(portals.id, portalId)))
    .returning({ id: portals.id });
  return rows.length > 0;
}

export async function insertPortalSession(tx: Db, row: typeof portalSessions.$inferInsert): Promise<void> {
  await tx.insert(portalSessions).values(row);
}

/**
 * Redeems an exchange code, in one conditional statement: the session whose code hash is `codeHash`, not redeemed yet
 * and not expired at `now`, gets the token's hash and lifetime. The session redeemed, or undefined (unknown, expired
 * or used: told apart by nobody). Concurrent redemptions of one code: one wins, the others find it redeemed.
 */
export async function redeemExchangeCode(
  tx: Db,
  { codeHash, tokenHash, now, expiresAtM }: { codeHash: string; tokenHash: string; now: number; expiresAtM: number },
): Promise<PortalSessionRow | undefined> {
  const [row] = await tx
    .update(portalSessions)
    .set({ tokenHash, tokenCreatedAtM: now, tokenExpiresAtM: expiresAtM })
    .where(and(eq(portalSessions.codeHash, codeHash), isNull(portalSessions.tokenHash), sql`${portalSessions.codeExpiresAtM} > ${now}`))
    .returning();
  return row;
}

/** The session of an exchange code's hash, whatever its state (to recognise a replay of one's own redemption). */
export async function findSessionByCodeHash(db: Db, codeHash: string): Promise<PortalSessionRow | undefined> {
  const [row] = await db.select().from(portalSessions).where(eq(portalSessions.codeHash, codeHash));
  return row;
}

/** A portal session's row with what decides whether it still works: its portal's state and its workspace's. */
export type ResolvedPortalSession = PortalSessionRow & {
  portal: Pick<
    PortalRow,
    "id" | "slug" | "name" | "apiId" | "enabled" | "returnUrl" | "brandingTitle" | "accentColor" | "logoUrl" | "updatedAtM"
  >;
  apiLive: boolean;
  workspaceEnabled: boolean;
};

/** The session of an access token's hash, with its portal, whether its API is live and its workspace enabled (one statement). */
export async function findSessionByTokenHash(db: Db, tokenHash: string): Promise<ResolvedPortalSession | undefined> {
  const [row] = await db
    .select({
      session: portalSessions,
      portal: {
        id: portals.id,
        slug: portals.slug,
        name: portals.name,
        apiId: portals.apiId,
        enabled: portals.enabled,
        returnUrl: portals.returnUrl,
        brandingTitle: portals.brandingTitle,
        accentColor: portals.accentColor,
        logoUrl: portals.logoUrl,
        updatedAtM: portals.updatedAtM,
      },
      apiLive: sql<boolean>`(${apis.deletedAtM} is null)`.mapWith(Boolean),
      workspaceEnabled: workspaces.enabled,
    })
    .from(portalSessions)
    .innerJoin(portals, eq(portals.id, portalSessions.portalId))
    .innerJoin(apis, eq(apis.id, portals.apiId))
    .innerJoin(workspaces, eq(workspaces.id, portalSessions.workspaceId))
    .where(eq(portalSessions.tokenHash, tokenHash));
  return row && Object.assign(row.session, { portal: row.portal, apiLive: row.apiLive, workspaceEnabled: row.workspaceEnabled });
}

/** Ends a session now (sign-out); whether it was live. */
export async function revokePortalSession(tx: Db, sessionId: string, now: number): Promise<boolean> {
  const rows = await tx
    .update(portalSessions)
    .set({ revokedAtM: now })
    .where(and(eq(portalSessions.id, sessionId), isNull(portalSessions.revokedAtM)))
    .returning({ id: portalSessions.id });
  return rows.length > 0;
}

/** A workspace's portal sessions minted for `externalId` (tests and the console's count). */
export async function countPortalSessions(db: Db, workspaceId: string, externalId?: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)`.mapWith(Number) })
    .from(portalSessions)
    .where(
      and(eq(portalSessions.workspaceId, workspaceId), externalId === undefined ? undefined : eq(portalSessions.externalId, externalId)),
    );
  return row?.n ?? 0;
}
