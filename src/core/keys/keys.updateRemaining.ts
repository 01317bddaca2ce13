import { keyPermission } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import { requirePermission } from "../principal.js";
import { MAX_INT32 } from "../../storage/int32.js";
import { InvalidInputError, NotFoundError } from "../../errors.js";
import { changeKeyRemaining, findLiveKeyForWrite } from "../../storage/keys/keys.writes.repository.js";
import type { KeyServices } from "./keys.services.js";

/** Increment or decrement (never below 0) by `value`, or set to `value` (null: unlimited). */
export type UpdateRemainingCommand = { keyId: string; op: "increment" | "decrement" | "set"; value: number | null };

/** Where the wire protocols' rules for changing remaining uses differ, each adapter says which it follows. */
export type UpdateRemainingRules = {
  /** `set` to null (unlimited) also removes the key's refill (v2's updateCredits); v1 keeps it. */
  unlimitedClearsRefill: boolean;
};

/** v1's keys.updateRemaining: the refill stays when the key is made unlimited. */
export const V1_UPDATE_REMAINING_RULES: UpdateRemainingRules = { unlimitedClearsRefill: false };

/** The key's remaining uses after a change (null: unlimited), and its refill (null: none; `day` null: daily). */
export type RemainingAfterChange = { remaining: number | null; refill: { amount: number; day: number | null } | null };

/** v1's keys.updateRemaining: changeRemaining by v1's rules, answering the remaining uses alone. */
export async function updateRemaining(
  services: KeyServices,
  caller: Caller,
  input: UpdateRemainingCommand,
): Promise<{ remaining: number | null }> {
  const { remaining } = await changeRemaining(services, caller, input, V1_UPDATE_REMAINING_RULES);
  return { remaining };
}

/**
 * Changes a key's remaining uses atomically, after any refill that is due, and answers them (null: unlimited) with
 * the key's refill. Another workspace's key is a missing one; an unlimited key can only be set.
 */
export async function changeRemaining(
  services: KeyServices,
  caller: Caller,
  input: UpdateRemainingCommand,
  rules: UpdateRemainingRules,
): Promise<RemainingAfterChange> {
  const { db } = services;
  const { op, value } = input;
  const notFound = () => new NotFoundError("key", input.keyId);
  const key = await findLiveKeyForWrite(db, input.keyId);
  if (!key || key.workspaceId !== caller.workspaceId) throw notFound();
  requirePermission(caller, keyPermission(caller.access, caller.workspaceId, key.apiId, key.id, "update_key"));

  const unlimited = () => new InvalidInputError({ kind: "remainingUnlimited", op });
  if (op !== "set") {
    if (key.remaining === null) throw unlimited();
    if (value === null) throw new InvalidInputError({ kind: "remainingByNull", op });
  }
  const change = op === "set" ? { op, value, clearRefill: rules.unlimitedClearsRefill } : { op, value: value! };
  const result = await services.changes.change(caller, async (tx, record) => {
    const changed = await changeKeyRemaining(tx, key.id, change, services.clock.now());
    if (changed) {
      record({
        event: "key.update",
        targets: [{ type: "key", id: key.id }],
        description: `${op === "set" ? "set" : `${op}ed`} the remaining uses of key ${key.id}`,
        details: { fields: ["remaining"], op },
      });
    }
    return changed;
  });
  if (result) {
    const refill = result.refillAmount === null ? null : { amount: result.refillAmount, day: result.refillDay };
    return { remaining: result.remaining, refill };
  }

  // Nothing was updated: tell why from the key as it is now (a concurrent request may have changed it).
  const current = await findLiveKeyForWrite(db, key.id);
  if (!current) throw notFound();
  if (current.remaining === null) throw unlimited();
  throw new InvalidInputError({ kind: "remainingBeyondMax", max: MAX_INT32 });
}
