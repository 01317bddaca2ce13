import { z } from "zod";
import { queryVerificationsSql } from "../../../core/analytics/analytics.core.js";
import { defineV2Rpc } from "../rpc.js";

export const getVerifications = defineV2Rpc({
  method: "POST",
  path: "/v2/analytics.getVerifications",
  auth: "rootKey",
  summary:
    "Runs a ClickHouse SQL SELECT over the verification tables (key_verifications_v1 and its per-minute, hour, day and month rollups), limited to the root key's workspace and APIs: parsed, checked against the supported subset and translated to keyhaven's store (docs/analytics.md). 412 `analytics_not_configured` with KEYHAVEN_ANALYTICS=off.",
  errors: [400, 401, 403, 412, 422, 503],
  returns: "One object per result row, columns as selected.",
  // Upstream does not restrict the body's other properties (contract §1.3): they are ignored.
  // The query's length is the core's to refuse (upstream's words, contract §10), not the schema's.
  input: z.object({ query: z.string().describe("A ClickHouse SELECT over key_verifications_v1 and its rollups.") }),
  output: z.array(z.record(z.string(), z.unknown())),
  handler: async (input, { deps, rootKey }) => ({ data: await queryVerificationsSql(deps, rootKey, input.query) }),
});
