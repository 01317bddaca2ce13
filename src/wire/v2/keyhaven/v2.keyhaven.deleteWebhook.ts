import { z } from "zod";
import { deleteWebhook as deleteWebhookCore } from "../../../core/webhooks/webhooks.core.js";
import { defineV2Rpc } from "../rpc.js";
import { webhookId } from "./webhooks.schemas.js";

export const deleteWebhook = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.deleteWebhook",
  auth: "rootKey",
  summary:
    "keyhaven extension: deletes a webhook endpoint and its deliveries (what was pending is never sent). Needs `webhook.*.manage_webhooks` (or `*`).",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing: `data` is an empty object.",
  lookupOnly: ["webhookId"],
  input: z.object({ webhookId }).strict(),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await deleteWebhookCore(deps, caller, input.webhookId);
    return { data: {} };
  },
});
