import { z } from "zod";
import { deleteIdentityByRef } from "../../../core/identities/identities.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identityRef } from "./identities.schemas.js";

export const deleteIdentity = defineV2Rpc({
  method: "POST",
  path: "/v2/identities.deleteIdentity",
  auth: "rootKey",
  lookupOnly: ["identity"],
  summary: "Deletes an identity (by id or externalId) with its rate limits; its keys keep working without an identity.",
  errors: [400, 401, 403, 404, 503],
  returns: "Only `meta`: this route's answer has no `data`.",
  noData: true,
  input: z.object({ identity: identityRef }).strict(),
  output: z.object({}).strict(),
  handler: async (input, { deps, caller }) => {
    await deleteIdentityByRef(deps, caller, input.identity);
    return { data: {} };
  },
});
