import { z } from "zod";
import { updateIdentity as updateIdentityCore } from "../../../core/identities/identities.core.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { meta, ratelimitOutput, ratelimitsInput, V1_IDENTITY_RULES } from "./identities.schemas.js";

export const updateIdentity = defineRpc({
  method: "POST",
  path: "/v1/identities.updateIdentity",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Updates an identity's meta and reconciles its rate limits by name (update, insert, delete) in one transaction.",
  errors: [400, 403, 404, 409, 503],
  returns: "The identity after the change.",
  input: z.object({
    identityId: idInput.optional(),
    externalId: z.string().min(1).max(256).optional(),
    environment: z.string().min(1).max(256).default("default"),
    meta: meta.optional(),
    ratelimits: ratelimitsInput.optional(),
  }),
  output: z.object({ id: z.string(), externalId: z.string(), meta, ratelimits: z.array(ratelimitOutput) }),
  handler: (input, { deps, caller }) => updateIdentityCore(deps, caller, input, V1_IDENTITY_RULES),
});
