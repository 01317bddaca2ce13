import { z } from "zod";
import { deleteRootKey as remove } from "../../../core/rootKeys/rootKeys.core.js";
import { defineRpc } from "../rpc.js";
import { operatorCaller } from "../workspaces/operator.caller.js";
import { idInput } from "../inputBounds.js";

export const deleteRootKey = defineRpc({
  method: "POST",
  path: "/v1/rootKeys.deleteRootKey",
  auth: "admin",
  summary: "Operator route (keyhaven extension): deletes a root key; the next call made with it is refused.",
  errors: [400, 403, 404, 503],
  returns: "The root key is deleted.",
  input: z.object({ keyId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, req }) => {
    // The key's workspace is known once it is deleted; the entry names it (Change.workspaceId).
    await remove(deps, operatorCaller(deps, req, ""), input.keyId);
    return {};
  },
});
