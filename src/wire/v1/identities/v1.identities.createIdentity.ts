import { z } from "zod";
import { createIdentity as createIdentityCore } from "../../../core/identities/identities.core.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { externalIdInput, meta, ratelimitsInput, V1_IDENTITY_RULES } from "./identities.schemas.js";

export const createIdentity = defineRpc({
  method: "POST",
  path: "/v1/identities.createIdentity",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Creates an identity (externalId unique in the workspace) with optional meta and named rate limits.",
  errors: [400, 403, 409, 503],
  returns: "The new identity's id.",
  input: z.object({ externalId: externalIdInput, meta: meta.optional(), ratelimits: ratelimitsInput.optional() }),
  output: z.object({ identityId: z.string() }),
  handler: async (input, { deps, caller }) => ({ identityId: await createIdentityCore(deps, caller, input, V1_IDENTITY_RULES) }),
});
