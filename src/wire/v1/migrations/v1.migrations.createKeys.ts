import { z } from "zod";
import { importKeys } from "../../../core/import/import.keys.js";
import { BULK_BODY_LIMIT, defineRpc } from "../rpc.js";
import { createKeysInputSchema } from "./migrations.schemas.js";

export const createKeys = defineRpc({
  method: "POST",
  path: "/v1/migrations.createKeys",
  auth: "rootKey",
  bodyLimit: BULK_BODY_LIMIT,
  summary:
    "Imports up to 100 existing keys, by SHA-256 hash or by plaintext, all or nothing. The body is a JSON array; keyIds come back in request order.",
  errors: [400, 403, 404, 409, 412, 503],
  returns: "The ids of the imported keys, in request order.",
  input: createKeysInputSchema,
  output: z.object({ keyIds: z.array(z.string()).describe("The new keys' ids, in the order of the request.") }),
  handler: async (items, { deps, caller }) => ({ keyIds: await importKeys(deps, caller, items, deps.clock.now()) }),
});
