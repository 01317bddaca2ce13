import { sql } from "drizzle-orm";
import { keys } from "../schema.js";

/**
 * Refills are applied lazily, never by a job: a key is due when its last refill (or its creation) is older than
 * the latest refill boundary (`keyhaven_refill_boundary`, migrations 0002 and 0014: one expression that PostgreSQL
 * inlines into each statement that calls it). Remaining uses change only by writes, so applying a due refill at the
 * first write after the boundary gives exactly what applying it at the boundary would have; reads report the same
 * value without writing. Each write applies it in its own atomic UPDATE, so replicas can never apply one refill twice.
 */
export const refillDue = sql<boolean>`(${keys.refillAmount} is not null and ${keys.remaining} is not null
  and keyhaven_refill_boundary(${keys.refillDay}, now()) > coalesce(${keys.lastRefillAt}, to_timestamp(${keys.createdAtM} / 1000.0)))`;

/** Uses left with every due refill applied: a refill sets remaining to the refill amount when that is more. */
export const effectiveRemaining = sql<number | null>`(case when ${refillDue}
  then greatest(${keys.remaining}, ${keys.refillAmount}) else ${keys.remaining} end)`;

/** `last_refill_at` after a write that applies due refills. */
export const lastRefillAfterWrite = sql`(case when ${refillDue} then now() else ${keys.lastRefillAt} end)`;
