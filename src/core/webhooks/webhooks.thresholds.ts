import { InvalidInputError, NotFoundError } from "../../errors.js";
import { findApi } from "../../storage/apis/apis.repository.js";
import type { Db } from "../../storage/client.js";
import { findLiveKeyForWrite } from "../../storage/keys/keys.writes.repository.js";
import { findThresholds, keyAlertState, saveThresholds, type StoredThresholds } from "../../storage/webhooks/alerts.repository.js";
import { apiPermission, keyPermission } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import { requirePermission } from "../principal.js";
import { DEFAULT_CREDITS_LOW_PERCENT, DEFAULT_EXPIRING_WITHIN_MS, MAX_EXPIRING_WITHIN_MS } from "./webhooks.alerts.js";

export type ThresholdServices = { db: Db; changes: WriteGate; clock: { now(): number } };

/** key.credits.low's threshold: a percentage (of the refill amount, else of the starting credits; 0: never) or a number of uses. */
export type CreditsLow = { percent: number } | { remaining: number };
export type ThresholdTarget = { apiId: string; keyId?: undefined } | { keyId: string; apiId?: undefined };

/** A target's thresholds as answered: what is set for it, and what holds for it (set here, on its API, or the defaults). */
export type AlertThresholds = {
  apiId: string;
  keyId?: string;
  /** Set on this target; absent: inherited. */
  creditsLow?: CreditsLow;
  expiringWithinMs?: number;
  effective: {
    creditsLow: CreditsLow;
    creditsLowFrom: "key" | "api" | "default";
    expiringWithinMs: number;
    expiringWithinFrom: "key" | "api" | "default";
    /** A key's: the remaining uses below which it is low now (absent: never). */
    creditsLowBelow?: number;
  };
  /** A key's alerts that hold now (`credits.low`, `credits.exhausted`, `expiring`, `expired`, `ratelimited`). */
  alerts?: string[];
};

type Resolved = { apiId: string; keyId: string | null };

/** The target in the caller's workspace, after the permission `action` on it (another workspace's is a 404). */
async function resolveTarget(
  services: ThresholdServices,
  caller: Caller,
  target: ThresholdTarget,
  action: "read" | "update",
): Promise<Resolved> {
  if (target.keyId !== undefined) {
    const key = await findLiveKeyForWrite(services.db, target.keyId);
    if (!key || key.workspaceId !== caller.workspaceId) throw new NotFoundError("key", target.keyId);
    requirePermission(caller, keyPermission(caller.access, caller.workspaceId, key.apiId, key.id, `${action}_key`));
    return { apiId: key.apiId, keyId: key.id };
  }
  requirePermission(caller, apiPermission(target.apiId, `${action}_api`));
  if (!(await findApi(services.db, caller.workspaceId, target.apiId))) throw new NotFoundError("api", target.apiId);
  return { apiId: target.apiId, keyId: null };
}

const creditsLowOf = (t: StoredThresholds | undefined): CreditsLow | undefined =>
  t?.creditsLowRemaining != null
    ? { remaining: t.creditsLowRemaining }
    : t?.creditsLowPercent != null
      ? { percent: t.creditsLowPercent }
      : undefined;

async function answer(db: Db, workspaceId: string, target: Resolved): Promise<AlertThresholds> {
  const own = await findThresholds(db, workspaceId, target.keyId ?? target.apiId);
  const api = target.keyId === null ? undefined : await findThresholds(db, workspaceId, target.apiId);
  const level = target.keyId === null ? "api" : "key";
  const ownCredits = creditsLowOf(own);
  const apiCredits = creditsLowOf(api);
  const out: AlertThresholds = {
    apiId: target.apiId,
    effective: {
      creditsLow: ownCredits ?? apiCredits ?? { percent: DEFAULT_CREDITS_LOW_PERCENT },
      creditsLowFrom: ownCredits ? level : apiCredits ? "api" : "default",
      expiringWithinMs: own?.expiringWithinMs ?? api?.expiringWithinMs ?? DEFAULT_EXPIRING_WITHIN_MS,
      expiringWithinFrom: own?.expiringWithinMs != null ? level : api?.expiringWithinMs != null ? "api" : "default",
    },
  };
  if (target.keyId !== null) out.keyId = target.keyId;
  if (ownCredits) out.creditsLow = ownCredits;
  if (own?.expiringWithinMs != null) out.expiringWithinMs = own.expiringWithinMs;
  if (target.keyId !== null) {
    const state = await keyAlertState(db, target.keyId);
    if (state?.creditsLowBelow != null) out.effective.creditsLowBelow = state.creditsLowBelow;
    out.alerts = state?.alerts ?? [];
  }
  return out;
}

/** The thresholds of an API or a key (read_api, or read_key on the key's API). */
export async function getAlertThresholds(services: ThresholdServices, caller: Caller, target: ThresholdTarget): Promise<AlertThresholds> {
  const resolved = await resolveTarget(services, caller, target, "read");
  return answer(services.db, caller.workspaceId, resolved);
}

/**
 * Sets an API's or a key's thresholds (update_api, or update_key on the key's API): what is given changes, null
 * removes a setting (inherited again), what is absent stays. Audited as api.update or key.update (field
 * `alertThresholds`). A change applies from the key's next change of credits (a spend, a refill, an update) and, for
 * the lead, from the next expiry scan: it sends nothing by itself.
 */
export async function setAlertThresholds(
  services: ThresholdServices,
  caller: Caller,
  input: ThresholdTarget & { creditsLow?: CreditsLow | null; expiringWithinMs?: number | null },
): Promise<AlertThresholds> {
  if (input.creditsLow === undefined && input.expiringWithinMs === undefined) {
    throw new InvalidInputError("Nothing to change: give creditsLow, expiringWithinMs, or both (null removes one).");
  }
  if (input.expiringWithinMs != null && (input.expiringWithinMs < 0 || input.expiringWithinMs > MAX_EXPIRING_WITHIN_MS)) {
    throw new InvalidInputError(`expiringWithinMs must be between 0 and ${MAX_EXPIRING_WITHIN_MS} (90 days).`);
  }
  const target = await resolveTarget(services, caller, input, "update");
  return services.changes.change(caller, async (tx, record) => {
    const current = await findThresholds(tx, caller.workspaceId, target.keyId ?? target.apiId);
    const next: StoredThresholds = {
      creditsLowPercent: current?.creditsLowPercent ?? null,
      creditsLowRemaining: current?.creditsLowRemaining ?? null,
      expiringWithinMs: current?.expiringWithinMs ?? null,
    };
    if (input.creditsLow !== undefined) {
      next.creditsLowPercent = input.creditsLow !== null && "percent" in input.creditsLow ? input.creditsLow.percent : null;
      next.creditsLowRemaining = input.creditsLow !== null && "remaining" in input.creditsLow ? input.creditsLow.remaining : null;
    }
    if (input.expiringWithinMs !== undefined) next.expiringWithinMs = input.expiringWithinMs;
    await saveThresholds(tx, { workspaceId: caller.workspaceId, ...target }, next, services.clock.now());
    const fields = ["alertThresholds"];
    if (target.keyId === null) {
      record({
        event: "api.update",
        targets: [{ type: "api", id: target.apiId }],
        description: `changed the alert thresholds of api ${target.apiId}`,
        details: { fields },
      });
    } else {
      record({
        event: "key.update",
        targets: [
          { type: "key", id: target.keyId },
          { type: "api", id: target.apiId },
        ],
        description: `changed the alert thresholds of key ${target.keyId}`,
        details: { fields },
      });
    }
    return answer(tx, caller.workspaceId, target);
  });
}
