import { z } from "zod";
import { createIdentity as createIdentityCore } from "../../../core/identities/identities.core.js";
import { defineV2Rpc } from "../rpc.js";
import { externalIdInput, metaInput, ratelimitsInput, V2_IDENTITY_BODY_LIMIT, V2_IDENTITY_RULES } from "./identities.schemas.js";

export const createIdentity = defineV2Rpc({
  method: "POST",
  path: "/v2/identities.createIdentity",
  auth: "rootKey",
  summary:
    "Creates an identity (the owner keys share rate limits and meta through); its externalId is unique in the workspace (409 when taken). A rate-limit name given twice is refused (400).",
  errors: [400, 401, 403, 409, 503],
  returns: "The new identity's id.",
  bodyLimit: V2_IDENTITY_BODY_LIMIT,
  // v2 leaves this body open: fields it does not know are ignored.
  input: z.object({ externalId: externalIdInput, meta: metaInput.optional(), ratelimits: ratelimitsInput.optional() }),
  output: z.object({ identityId: z.string().describe("The new identity's id (`id_…`).") }),
  handler: async (input, { deps, caller }) => ({
    data: { identityId: await createIdentityCore(deps, caller, input, V2_IDENTITY_RULES) },
  }),
});
