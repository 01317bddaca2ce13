import type { Actor, Caller, Origin } from "../caller.js";
import { trustedCaller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import { isUniqueViolation } from "../../storage/client.js";
import {
  type AdoptedState,
  adoptPendingKey,
  findKeyRefill,
  findPendingKeyById,
  setAdoptedKeyRefill,
} from "../../storage/keys/keys.pending.repository.js";

export type AdoptOutcome = { workspaceId: string; apiId: string } | "notPending" | "notAllowed";

/** Who adopts a pending key: keyhaven itself, on the verification that presented it (docs/audit.md). */
export const UNKEY_FALLBACK_ACTOR: Actor = { kind: "system", id: "unkey-fallback", name: "Unkey fallback" };

/** The caller of an adoption: the fallback, in `workspaceId` (the key's), from the verification's origin. */
export function fallbackCaller(workspaceId: string, origin: Origin): Caller {
  return trustedCaller(UNKEY_FALLBACK_ACTOR, workspaceId, origin);
}

/**
 * Adopts the pending key `keyId` (issue 36 §2): its hash becomes the presented key's, `adopted_at_m` now, and its
 * state what Unkey's verifyKey answered, in one change through the write gate (event `key.adopt`), applied only
 * while the key has no hash (two adoptions at once apply once; a key that verifies already is never overwritten),
 * is live, is of `workspaceId` when one is known, and `mayAdopt` allows it. The adopted key's workspace and API;
 * `notPending` when no live key of that id is pending (or it got a hash meanwhile); `notAllowed` when one is, but
 * not for this request (another workspace, or a caller who may not verify it).
 */
export async function adoptKey(
  changes: WriteGate,
  origin: Origin,
  adoption: { keyId: string; workspaceId: string | undefined; hash: string; state: AdoptedState },
  now: number,
  mayAdopt: (key: { id: string; apiId: string; workspaceId: string }) => boolean = () => true,
): Promise<AdoptOutcome> {
  const caller = fallbackCaller(adoption.workspaceId ?? "", origin);
  try {
    return await changes.change(caller, async (tx, record): Promise<AdoptOutcome> => {
      const pending = await findPendingKeyById(tx, adoption.keyId);
      if (pending === undefined) return "notPending";
      // Of another workspace than the request's, or the verification's caller may not verify it (v2: verify_key).
      if ((adoption.workspaceId !== undefined && pending.workspaceId !== adoption.workspaceId) || !mayAdopt(pending)) return "notAllowed";
      const adopted = await adoptPendingKey(tx, {
        keyId: adoption.keyId,
        workspaceId: adoption.workspaceId,
        hash: adoption.hash,
        now,
        state: adoption.state,
      });
      if (adopted === undefined) return "notPending";
      record({
        event: "key.adopt",
        workspaceId: adopted.workspaceId,
        targets: [
          { type: "key", id: adopted.id },
          { type: "api", id: adopted.apiId },
        ],
        description: `adopted pending key ${adopted.id}: hosted Unkey knew the key a verification presented`,
        details: { fields: ["hash", "name", "meta", "expires", "enabled", "remaining"] },
      });
      return { workspaceId: adopted.workspaceId, apiId: adopted.apiId };
    });
  } catch (err) {
    // The presented key's hash is another key's already (it was created meanwhile): that key answers, not this one.
    if (isUniqueViolation(err)) return "notPending";
    throw err;
  }
}

/**
 * After an adoption, what Unkey's getKey says that verifyKey did not: the key's refill, set when it differs (event
 * `key.update`, by the same actor), while the key still has the adopted hash. Whether anything changed.
 */
export async function refreshAdoptedKey(
  changes: WriteGate,
  origin: Origin,
  key: { keyId: string; workspaceId: string; hash: string },
  upstream: { refill: { interval: "daily" | "monthly"; amount: number; refillDay?: number | undefined } | undefined },
  now: number,
): Promise<boolean> {
  const caller = fallbackCaller(key.workspaceId, origin);
  const refillAmount = upstream.refill?.amount ?? null;
  const refillDay = upstream.refill === undefined ? null : upstream.refill.interval === "monthly" ? (upstream.refill.refillDay ?? 1) : null;
  return changes.change(caller, async (tx, record) => {
    const stored = await findKeyRefill(tx, key.keyId, key.hash);
    if (stored === undefined || stored.remaining === null) return false;
    if (stored.refillAmount === refillAmount && stored.refillDay === refillDay) return false;
    if (!(await setAdoptedKeyRefill(tx, { keyId: key.keyId, hash: key.hash, refillAmount, refillDay, now }))) return false;
    record({
      event: "key.update",
      workspaceId: key.workspaceId,
      targets: [{ type: "key", id: key.keyId }],
      description: `refreshed adopted key ${key.keyId} from hosted Unkey`,
      details: { fields: ["refill"] },
    });
    return true;
  });
}
