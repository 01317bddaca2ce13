import { z } from "zod";
import type { OverrideRow } from "../../../storage/ratelimits/ratelimits.repository.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { MAX_WINDOW_MS } from "../../../storage/ratelimits/ratelimiter.js";
import type { LimitRules, OverrideReadRules } from "../../../core/ratelimits/ratelimits.core.js";

/**
 * v2's limit: a namespace by its id or else its name, and one that does not exist is refused for want of
 * `ratelimit.*.create_namespace` (403).
 */
export const V2_LIMIT_RULES: LimitRules = { namespaceBy: "idOrName", missingNamespace: "forbidden" };

/** v2's getOverride reads the override limit applies: the identifier's own, else the best matching `*` pattern. */
export const V2_OVERRIDE_READ_RULES: OverrideReadRules = { match: "applicable" };

/** v2's namespace field: its name or its id (`rlns_…`), in one string (the id wins when both match). */
export const namespaceInput = z.string().min(1).max(512).describe("The namespace's name or its id (`rlns_…`).");

export const identifierInput = z.string().min(1).max(512);

/** A window in milliseconds, as limit takes it: one second to 30 days (the longest the limiter keeps counters). */
export const limitDurationInput = z.int().min(1000).max(MAX_WINDOW_MS).describe("The window, in milliseconds.");

/** An override's window: at least one second (v2 sets no maximum; keyhaven's is the column's). */
export const overrideDurationInput = z.int().min(1000).max(MAX_INT32).describe("The window, in milliseconds.");

export const limitInput = (min: number) => z.int().min(min).max(MAX_INT32);

export const overrideOutput = z.object({
  overrideId: z.string().describe("The override's id (`rlor_…`)."),
  identifier: z.string().describe("The identifier or `*` pattern the override was set for."),
  limit: z.number(),
  duration: z.number(),
});

/** An override as v2 shows it (no `async`). */
export const overrideData = (row: OverrideRow) => ({
  overrideId: row.id,
  identifier: row.identifier,
  limit: row.limit,
  duration: row.duration,
});
