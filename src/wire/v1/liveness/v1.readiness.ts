import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { defineRpc } from "../rpc.js";
import { DISK_FULL_HOLD_MS } from "../../../storage/dependency.js";
import { HEALTH_TIMEOUT_MS, probeDatabase, probeRedis } from "../../../http/health.js";

export const readiness = defineRpc({
  method: "GET",
  path: "/v1/readiness",
  auth: "none",
  summary:
    "keyhaven extension: 200 when this replica can serve, i.e. the store answers the statement every request starts with " +
    "(it reads the store's epoch table) correctly and Redis (when REDIS_URL is set) answers PING, " +
    `each within ${HEALTH_TIMEOUT_MS} ms, and no write failed for a full disk in the last ${DISK_FULL_HOLD_MS / 1000} s; otherwise 503 ` +
    "SERVICE_UNAVAILABLE naming what is down and what happened (refused the connection, did not answer within 1000 ms, " +
    "answered with an error, ...). With KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open (the default) Redis being down " +
    'does not stop serving: the answer stays 200 with `redis: "down"`. It recovers by itself when they are back. ' +
    "For load balancers and orchestrators; /v1/liveness stays the cheap process check.",
  errors: [503],
  returns: "Ready: the store (and Redis, when configured) answered within 1 s.",
  input: z.object({}),
  output: z.object({
    status: z.literal("ready"),
    services: z.object({ database: z.literal("up"), redis: z.enum(["up", "down", "not configured"]) }),
  }),
  handler: async (_input, { deps }) => {
    const [database, redis] = await Promise.all([probeDatabase(deps), probeRedis(deps)]);
    // Failing open, requests are served without Redis: this replica stays ready (and reports Redis down).
    const redisStops = redis.state === "down" && deps.config.ratelimitOnRedisFailure === "closed";
    const diskFull = database.state === "up" ? deps.store.state.unreadyReason() : undefined;
    if (database.state === "down" || redisStops || diskFull) {
      // What happened to each, in words (issue 34 §6: a refused connection is not "did not answer within 1000 ms").
      const reasons: string[] = [];
      const databaseReason = database.state === "down" ? database.reason : undefined;
      const redisReason = redisStops && redis.state === "down" ? redis.reason : undefined;
      if (databaseReason !== undefined && databaseReason === redisReason) reasons.push(`the database and Redis ${databaseReason}`);
      else {
        if (databaseReason !== undefined) reasons.push(`the database ${databaseReason}`);
        if (redisReason !== undefined) reasons.push(`Redis ${redisReason}`);
      }
      if (diskFull) reasons.push(diskFull);
      throw new ApiError("SERVICE_UNAVAILABLE", `not ready: ${reasons.join("; ")}`);
    }
    return { status: "ready" as const, services: { database: database.state, redis: redis.state } };
  },
});
