import type { Config } from "../../config.js";
import { secretsEqual } from "../../crypto/hash.js";
import { ApiError } from "../../http/errors.js";
import { bearerToken } from "../../http/bearer.js";

/** Operator routes take `Authorization: Bearer <KEYHAVEN_ADMIN_TOKEN>`; without a configured token they are off. */
export function authenticateAdmin(config: Config, authorization: string | undefined): void {
  if (!config.adminToken) {
    throw new ApiError("FORBIDDEN", "operator routes are disabled: set KEYHAVEN_ADMIN_TOKEN to enable them");
  }
  const token = bearerToken(authorization);
  if (token === "") throw new ApiError("UNAUTHORIZED", "admin token required");
  if (!secretsEqual(token, config.adminToken)) throw new ApiError("UNAUTHORIZED", "admin token is not valid");
}
