import { z } from "zod";
import { rerollPortalKey } from "../../../core/portals/portals.access.js";
import { v2Id } from "../inputBounds.js";
import { createdKeyOutput, V2_MAX_EXPIRES } from "../keys/keys.schemas.js";
import { defineV2Rpc } from "../rpc.js";

export const rerollKey = defineV2Rpc({
  method: "POST",
  path: "/v2/portal.rerollKey",
  auth: "portalSession",
  summary:
    "Rerolls one of the portal session's end user's keys, as keys.rerollKey does (the old key verifies `expiration` ms more). Needs the session's `keys:reroll` scope; any key not the end user's in the portal's API is answered as missing.",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "The new key, shown only in this answer, and its id.",
  input: z.object({
    keyId: v2Id.describe("The key to replace."),
    expiration: z.int().min(0).max(V2_MAX_EXPIRES).describe("How long (ms) the old key keeps verifying; 0: it expires now."),
  }),
  output: createdKeyOutput,
  handler: async (input, { deps, session, caller }) => ({
    data: await rerollPortalKey(deps, session, caller, { keyId: input.keyId, expiration: input.expiration }),
  }),
});
