import { z } from "zod";
import { queryVerificationsSql } from "../../../core/analytics/analytics.core.js";
import { defineV2Rpc } from "../rpc.js";

export const getVerifications = defineV2Rpc({
  method: "POST",
  path: "/v2/analytics.getVerifications",
  auth: "rootKey",
  summary:
    "Upstream runs a ClickHouse SQL query over verification events. keyhaven has no ClickHouse: after authentication and the read_analytics check it answers 412 `analytics_not_configured`, as upstream does without an analytics backend (v1's analytics.getVerifications serves keyhaven's own counts).",
  errors: [400, 401, 403, 412, 503],
  returns: "Never answered: always 412 (one object per result row upstream).",
  // Upstream does not restrict the body's other properties (contract §1.3): they are ignored.
  input: z.object({ query: z.string().describe("A ClickHouse SELECT over key_verifications_v1 and its rollups.") }),
  output: z.array(z.record(z.string(), z.unknown())),
  handler: async (_input, { rootKey }) => queryVerificationsSql(rootKey),
});
