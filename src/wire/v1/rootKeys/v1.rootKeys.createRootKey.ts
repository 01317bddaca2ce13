import { z } from "zod";
import { createRootKey as create } from "../../../core/rootKeys/rootKeys.core.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { operatorCaller } from "../workspaces/operator.caller.js";
import { idInput } from "../inputBounds.js";

export const createRootKey = defineRpc({
  method: "POST",
  path: "/v1/rootKeys.createRootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  auth: "admin",
  summary:
    "Operator route (keyhaven extension): creates a root key for a workspace, with the permissions listed (none for an empty list). The key is shown once; only its hash is stored.",
  errors: [400, 403, 404, 503],
  returns: "The new root key, shown only in this answer, and its id.",
  input: z.object({
    workspaceId: idInput,
    name: z.string().max(256).optional(),
    // May be empty (as v1): such a key authenticates, and every route that needs a permission refuses it with 403.
    permissions: z.array(z.string().min(1).max(512)).max(1000),
  }),
  output: z.object({ keyId: z.string(), key: z.string() }),
  handler: async (input, { deps, req }) => {
    return create(deps, operatorCaller(deps, req, input.workspaceId), input);
  },
});
