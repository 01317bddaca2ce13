import { z } from "zod";
import { createWebhook as createWebhookCore } from "../../../core/webhooks/webhooks.core.js";
import { defineV2Rpc } from "../rpc.js";
import { webhookDescription, webhookEvents, webhookUrl } from "./webhooks.schemas.js";

export const createWebhook = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.createWebhook",
  auth: "rootKey",
  summary:
    "keyhaven extension: creates a webhook endpoint of the root key's workspace, sent the events named, signed per Standard Webhooks. Needs `webhook.*.manage_webhooks` (or `*`). The signing secret is answered once, here.",
  errors: [400, 401, 403, 412, 503],
  returns: "The endpoint's id and its signing secret (`whsec_…`), shown only now.",
  input: z
    .object({
      url: webhookUrl,
      events: webhookEvents,
      description: webhookDescription.optional(),
    })
    .strict(),
  output: z.object({
    webhookId: z.string().describe("The endpoint's id (`wh_…`)."),
    secret: z.string().describe("The signing secret, `whsec_<base64>`: keep it; keyhaven never shows it again."),
  }),
  handler: async (input, { deps, caller }) => {
    const { webhook, secret } = await createWebhookCore(deps, caller, input);
    return { data: { webhookId: webhook.id, secret } };
  },
});
