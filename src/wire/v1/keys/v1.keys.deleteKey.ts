import { z } from "zod";
import { deleteKey as deleteKeyCore } from "../../../core/keys/keys.delete.js";
import { defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";

export const deleteKey = defineRpc({
  method: "POST",
  path: "/v1/keys.deleteKey",
  auth: "rootKey",
  summary: "Deletes a key: it stops verifying at once. With `permanent: true` the row is removed, so the same key can be imported again.",
  errors: [400, 403, 404, 503],
  returns: "The key is deleted.",
  input: z.object({ keyId: idInput, permanent: z.boolean().default(false) }),
  output: z.object({}),
  // Authenticated before the lookup (v1 looked first), so a wrong root key learns nothing about the id.
  handler: async (input, { deps, caller }) => {
    await deleteKeyCore(deps, caller, input);
    return {};
  },
});
