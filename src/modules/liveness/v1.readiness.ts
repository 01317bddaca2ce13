import { z } from "zod";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { checkDatabase, checkRedis, HEALTH_TIMEOUT_MS } from "./health.js";

export const readiness = defineRpc({
  method: "GET",
  path: "/v1/readiness",
  auth: "none",
  summary:
    "keyhaven extension: 200 when this replica can serve, i.e. PostgreSQL answers `select 1` and Redis (when REDIS_URL is set) answers PING, " +
    `each within ${HEALTH_TIMEOUT_MS} ms; otherwise 503 SERVICE_UNAVAILABLE naming what is down. It recovers by itself when they are back. ` +
    "For load balancers and orchestrators; /v1/liveness stays the cheap process check.",
  input: z.object({}),
  output: z.object({
    status: z.literal("ready"),
    services: z.object({ database: z.literal("up"), redis: z.enum(["up", "not configured"]) }),
  }),
  handler: async (_input, { deps }) => {
    const [database, redis] = await Promise.all([checkDatabase(deps), checkRedis(deps)]);
    if (database === "down" || redis === "down") {
      const down = [database === "down" && "the database", redis === "down" && "Redis"].filter(Boolean).join(" and ");
      throw new ApiError("SERVICE_UNAVAILABLE", `not ready: ${down} did not answer within ${HEALTH_TIMEOUT_MS} ms`);
    }
    return { status: "ready" as const, services: { database, redis } };
  },
});
