import { z } from "zod";
import { updateIdentityByRef } from "../../../core/identities/identities.core.js";
import { defineV2Rpc } from "../rpc.js";
import {
  identityData,
  identityOutput,
  identityRef,
  metaInput,
  ratelimitsInput,
  V2_IDENTITY_BODY_LIMIT,
  V2_IDENTITY_RULES,
} from "./identities.schemas.js";

export const updateIdentity = defineV2Rpc({
  method: "POST",
  path: "/v2/identities.updateIdentity",
  auth: "rootKey",
  lookupOnly: ["identity"],
  summary:
    "Replaces an identity's meta (`{}` clears it) and, when `ratelimits` is given, its rate limits by name (`[]` removes them all; a kept name keeps its id).",
  errors: [400, 401, 403, 404, 503],
  returns: "The identity as stored afterwards.",
  bodyLimit: V2_IDENTITY_BODY_LIMIT,
  input: z.object({ identity: identityRef, meta: metaInput.optional(), ratelimits: ratelimitsInput.optional() }).strict(),
  output: identityOutput,
  handler: async (input, { deps, caller }) => ({
    data: identityData(await updateIdentityByRef(deps, caller, input, V2_IDENTITY_RULES)),
  }),
});
