import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { defineRpc } from "../rpc.js";
import { DISK_FULL_HOLD_MS } from "../../../storage/dependency.js";
import { checkDatabase, checkRedis, HEALTH_TIMEOUT_MS } from "../../../http/health.js";

export const readiness = defineRpc({
  method: "GET",
  path: "/v1/readiness",
  auth: "none",
  summary:
    "keyhaven extension: 200 when this replica can serve, i.e. PostgreSQL answers `select 1` and Redis (when REDIS_URL is set) answers PING, " +
    `each within ${HEALTH_TIMEOUT_MS} ms, and no write failed for a full disk in the last ${DISK_FULL_HOLD_MS / 1000} s; otherwise 503 ` +
    "SERVICE_UNAVAILABLE naming what is down. With KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open (the default) Redis being down " +
    'does not stop serving: the answer stays 200 with `redis: "down"`. It recovers by itself when they are back. ' +
    "For load balancers and orchestrators; /v1/liveness stays the cheap process check.",
  errors: [503],
  returns: "Ready: PostgreSQL (and Redis, when configured) answered within 1 s.",
  input: z.object({}),
  output: z.object({
    status: z.literal("ready"),
    services: z.object({ database: z.literal("up"), redis: z.enum(["up", "down", "not configured"]) }),
  }),
  handler: async (_input, { deps }) => {
    const [database, redis] = await Promise.all([checkDatabase(deps), checkRedis(deps)]);
    // Failing open, requests are served without Redis: this replica stays ready (and reports Redis down).
    const redisStops = redis === "down" && deps.config.ratelimitOnRedisFailure === "closed";
    const diskFull = database === "up" ? deps.store.state.unreadyReason() : undefined;
    if (database === "down" || redisStops || diskFull) {
      const down = [database === "down" && "the database", redisStops && "Redis"].filter(Boolean).join(" and ");
      const reasons = [down && `${down} did not answer within ${HEALTH_TIMEOUT_MS} ms`, diskFull].filter(Boolean);
      throw new ApiError("SERVICE_UNAVAILABLE", `not ready: ${reasons.join("; ")}`);
    }
    return { status: "ready" as const, services: { database, redis } };
  },
});
