import { z } from "zod";
import { exchangePortalCode } from "../../../core/portals/portals.sessions.js";
import { originOf } from "../../../http/origin.js";
import { defineV2Rpc } from "../rpc.js";

export const exchangeCode = defineV2Rpc({
  method: "POST",
  path: "/v2/portal.exchangeCode",
  auth: "none",
  summary:
    "Exchanges a portal session's single-use code (from the URL portal.createSession answered) for its access token, valid 24 hours: sent as the `portal_session` cookie to the portal routes. No credential: the code is one.",
  errors: [400, 401, 503],
  returns: "The access token and when it expires (unix ms).",
  lookupOnly: ["code"],
  input: z.object({ code: z.string().min(1).max(1024).describe("The `code` of the session's URL.") }).strict(),
  output: z.object({ accessToken: z.string(), expiresAt: z.int() }),
  handler: async (input, { deps, req, reply }) => {
    reply.header("Cache-Control", "no-store").header("Pragma", "no-cache");
    const { accessToken, expiresAt } = await exchangePortalCode(deps, input.code, originOf("v2", deps.config.trustProxy, req));
    return { data: { accessToken, expiresAt } };
  },
});
