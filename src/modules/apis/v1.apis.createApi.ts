import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { defineRpc } from "../../rpc.js";
import { insertApi } from "./apis.repository.js";

export const createApi = defineRpc({
  method: "POST",
  path: "/v1/apis.createApi",
  summary: "Creates an API: the keyspace that keys are created in and verified against.",
  errors: [400, 403, 503],
  returns: "The new API's id and name.",
  input: z.object({
    name: z.string().min(3).max(256),
    storeEncryptedKeys: z.boolean().optional(),
    defaultPrefix: z.string().min(1).max(8).optional(),
    defaultBytes: z.int().min(16).max(255).optional(),
    deleteProtection: z.boolean().optional(),
  }),
  output: z.object({ apiId: z.string(), name: z.string() }),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps.db, authorization);
    requirePermission(auth, { or: ["*", "api.*.create_api"] });
    const apiId = await insertApi(deps.db, { ...input, workspaceId: auth.workspaceId });
    return { apiId, name: input.name };
  },
});
