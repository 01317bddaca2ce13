import { z } from "zod";
import { createApi as createApiCore } from "../../../core/apis/apis.core.js";
import { defineV2Rpc } from "../rpc.js";

export const createApi = defineV2Rpc({
  method: "POST",
  path: "/v2/apis.createApi",
  auth: "rootKey",
  summary: "Creates an API: the keyspace that keys are created in and verified against.",
  errors: [400, 401, 403, 503],
  returns: "The new API's id.",
  input: z.object({ name: z.string().min(3).max(256).describe("A name for people; names need not be unique.") }).strict(),
  output: z.object({ apiId: z.string().describe("The new API's id (`api_…`).") }),
  handler: async (input, { deps, caller }) => ({ data: { apiId: await createApiCore(deps, caller, { name: input.name }) } }),
});
