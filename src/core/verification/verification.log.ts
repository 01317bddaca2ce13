import type { Config } from "../../config.js";
import type { Db } from "../../storage/client.js";
import { type LoggedVerification, latestVerificationsOfKey } from "../../storage/verificationLog/verificationLog.repository.js";
import { type Principal, requirePermission } from "../principal.js";

/** Rows of the verification log a key's page shows: its newest. */
export const KEY_PAGE_LOG_ROWS = 20;

export type { LoggedVerification };

/**
 * The key's `limit` newest rows of the verification log, newest first, in the caller's workspace; undefined when there
 * is no log (config.verificationLogDays is 0). The key's API's analytics are read with the same permission as its
 * counts (read_api: keys.getVerifications, analytics.getVerifications), and a key of another workspace has no rows here.
 */
export async function latestKeyVerifications(
  services: { db: Db; config: Pick<Config, "verificationLogDays"> },
  caller: Principal,
  key: { id: string; apiId: string },
  limit = KEY_PAGE_LOG_ROWS,
): Promise<LoggedVerification[] | undefined> {
  requirePermission(caller, { or: ["*", "api.*.read_api", `api.${key.apiId}.read_api`] });
  if (services.config.verificationLogDays === 0) return undefined;
  return latestVerificationsOfKey(services.db, caller.workspaceId, key.id, limit);
}
