import { asc, inArray } from "drizzle-orm";
import type { Db } from "../client.js";
import { ratelimits } from "../schema.js";

/** A rate limit of a key or an identity, as the reads that list every one of them show it. */
export type NamedRatelimit = { id: string; name: string; limit: number; duration: number; autoApply: boolean };

/**
 * The rate limits owned by each of these keys or identities, by owner id, each list by name (an owner without any
 * maps to []). One statement whatever the number of owners; the one reader of owned rate limits.
 */
export async function ratelimitsOwnedBy(db: Db, owner: "key" | "identity", ids: string[]): Promise<Map<string, NamedRatelimit[]>> {
  const byOwner = new Map<string, NamedRatelimit[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return byOwner;
  const ownerColumn = owner === "key" ? ratelimits.keyId : ratelimits.identityId;
  const rows = await db
    .select({
      ownerId: ownerColumn,
      id: ratelimits.id,
      name: ratelimits.name,
      limit: ratelimits.limit,
      duration: ratelimits.duration,
      autoApply: ratelimits.autoApply,
    })
    .from(ratelimits)
    .where(inArray(ownerColumn, ids))
    .orderBy(asc(ratelimits.name));
  for (const { ownerId, ...r } of rows) byOwner.get(ownerId!)?.push(r);
  return byOwner;
}
