import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { deleteRootKeyById } from "../../../storage/rootKeys/rootKeys.repository.js";

export const deleteRootKey = defineRpc({
  method: "POST",
  path: "/v1/rootKeys.deleteRootKey",
  auth: "admin",
  summary: "Operator route (keyhaven extension): deletes a root key; the next call made with it is refused.",
  errors: [400, 403, 404, 503],
  returns: "The root key is deleted.",
  input: z.object({ keyId: idInput }),
  output: z.object({}),
  handler: async (input, { deps }) => {
    if (!(await deleteRootKeyById(deps.db, input.keyId))) throw new ApiError("NOT_FOUND", `root key ${input.keyId} not found`);
    return {};
  },
});
