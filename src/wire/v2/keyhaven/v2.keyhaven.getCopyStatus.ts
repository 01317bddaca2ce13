import { z } from "zod";
import { getCopyStatus as getCopyStatusCore } from "../../../core/import/import.copyStatus.js";
import { v2LookupRef } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";

export const getCopyStatus = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.getCopyStatus",
  auth: "rootKey",
  summary:
    "keyhaven extension, for `keyhaven import --from-unkey --check`: per API, its live keys and how many of them are verifiable, pending (copied from hosted Unkey without their secret) and adopted (pending until a verification adopted them).",
  errors: [400, 401, 403, 503],
  returns: "One entry per API asked for, in the request's order; `found: false` for an API the workspace does not have.",
  input: z
    .object({
      apiIds: z.array(v2LookupRef.max(255)).min(1).max(100).describe("The APIs to report on (1 to 100)."),
    })
    .strict(),
  output: z.array(
    z.object({
      apiId: z.string(),
      found: z.boolean().describe("false: the workspace has no live API of this id (the counts are then absent)."),
      keys: z.number().optional().describe("Live keys."),
      verifiable: z.number().optional().describe("Keys that can verify: keys − pending."),
      pending: z.number().optional().describe("Keys without a hash yet, waiting for adoption."),
      adopted: z.number().optional().describe("Keys that were pending until a verification adopted them."),
    }),
  ),
  handler: async (input, { deps, caller }) => ({ data: await getCopyStatusCore(deps, caller, input.apiIds) }),
});
