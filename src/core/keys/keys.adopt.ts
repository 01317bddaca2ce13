import type { Actor, Caller, Origin } from "../caller.js";
import { trustedCaller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import { isUniqueViolation } from "../../storage/client.js";
import { type AdoptedState, adoptPendingKey, findKeyRefill, findPendingKeyById } from "../../storage/keys/keys.pending.repository.js";
import { keyRatelimits } from "../../storage/keys/keys.ratelimit.repository.js";
import type { KeyServices } from "./keys.services.js";
import { type UpdateKeyCommand, updateKey, V2_UPDATE_KEY_RULES } from "./keys.update.js";

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

/** What the refresh after an adoption reads of Unkey's keys.getKey answer. */
export type UpstreamKeyState = {
  /** Absent: unlimited uses. */
  credits?: { refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number | undefined } | undefined } | undefined;
  /** The key's own rate limits (absent: none). */
  ratelimits?: { name: string; limit: number; duration: number; autoApply: boolean }[] | undefined;
};

/**
 * After an adoption, what Unkey's getKey says that verifyKey did not: the key's refill and its own rate limits, set
 * through keys.updateKey's one rule (V2_UPDATE_KEY_RULES: event `key.update`, by the same actor) for those that
 * differ, while the key still has the adopted hash. Whether anything changed.
 */
export async function refreshAdoptedKey(
  services: KeyServices,
  origin: Origin,
  key: { keyId: string; workspaceId: string; hash: string },
  upstream: UpstreamKeyState,
): Promise<boolean> {
  const stored = await findKeyRefill(services.db, key.keyId, key.hash);
  if (stored === undefined) return false;
  const command: UpdateKeyCommand = { keyId: key.keyId };
  // Uses are as adopted (verifyKey's count, since spent here): only the refill settings come from getKey.
  if (stored.remaining !== null && upstream.credits !== undefined) {
    const refill = upstream.credits.refill;
    const refillDay = refill === undefined ? null : refill.interval === "monthly" ? (refill.refillDay ?? 1) : null;
    if (stored.refillAmount !== (refill?.amount ?? null) || stored.refillDay !== refillDay) {
      command.refill = refill === undefined ? null : { interval: refill.interval, amount: refill.amount, refillDay: refill.refillDay };
    }
  }
  const wanted = upstream.ratelimits ?? [];
  const have = (await keyRatelimits(services.db, [key.keyId])).get(key.keyId) ?? [];
  const text = (limits: readonly { name: string; limit: number; duration: number; autoApply: boolean }[]) =>
    limits
      .map((l) => `${l.name}\u0000${l.limit}\u0000${l.duration}\u0000${l.autoApply}`)
      .sort()
      .join("\n");
  if (text(wanted) !== text(have)) {
    command.ratelimits = wanted.map((l) => ({ name: l.name, limit: l.limit, duration: l.duration, autoApply: l.autoApply }));
  }
  if (command.refill === undefined && command.ratelimits === undefined) return false;
  await updateKey(services, fallbackCaller(key.workspaceId, origin), command, V2_UPDATE_KEY_RULES);
  return true;
}
