import { z } from "zod";
import { getIdentityByRef } from "../../../core/identities/identities.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identityData, identityOutput, identityRef } from "./identities.schemas.js";

export const getIdentity = defineV2Rpc({
  method: "POST",
  path: "/v2/identities.getIdentity",
  auth: "rootKey",
  lookupOnly: ["identity"],
  summary: "Reads an identity by id or externalId, with its meta and rate limits.",
  errors: [400, 401, 403, 404, 503],
  returns: "The identity.",
  input: z.object({ identity: identityRef }).strict(),
  output: identityOutput,
  handler: async (input, { deps, caller }) => ({
    data: identityData(await getIdentityByRef(deps, caller, input.identity)),
  }),
});
