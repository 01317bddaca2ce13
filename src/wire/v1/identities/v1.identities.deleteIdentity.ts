import { z } from "zod";
import { deleteIdentity as deleteIdentityCore } from "../../../core/identities/identities.core.js";
import { defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";

export const deleteIdentity = defineRpc({
  method: "POST",
  path: "/v1/identities.deleteIdentity",
  auth: "rootKey",
  summary: "Hard-deletes an identity and its rate limits; its keys keep working without an identity.",
  errors: [400, 403, 404, 503],
  returns: "The identity is deleted; its keys keep verifying without it.",
  input: z.object({ identityId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await deleteIdentityCore(deps, caller, input.identityId);
    return {};
  },
});
