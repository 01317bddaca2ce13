import { z } from "zod";
import { listWebhooks as listWebhooksCore } from "../../../core/webhooks/webhooks.core.js";
import { defineV2Rpc } from "../rpc.js";
import { webhookOut, webhookSchema } from "./webhooks.schemas.js";

export const listWebhooks = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.listWebhooks",
  auth: "rootKey",
  summary:
    "keyhaven extension: the webhook endpoints of the root key's workspace (at most 20), oldest first, without their secrets. Needs `webhook.*.manage_webhooks` (or `*`).",
  errors: [400, 401, 403, 503],
  returns: "The workspace's endpoints.",
  input: z.object({}).strict(),
  output: z.array(webhookSchema),
  handler: async (_input, { deps, caller }) => {
    const webhooks = await listWebhooksCore(deps, caller);
    return { data: webhooks.map(webhookOut) };
  },
});
