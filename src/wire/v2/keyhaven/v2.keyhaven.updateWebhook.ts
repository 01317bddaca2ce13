import { z } from "zod";
import { updateWebhook as updateWebhookCore } from "../../../core/webhooks/webhooks.core.js";
import { defineV2Rpc } from "../rpc.js";
import { webhookDescription, webhookEvents, webhookId, webhookOut, webhookSchema, webhookUrl } from "./webhooks.schemas.js";

export const updateWebhook = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.updateWebhook",
  auth: "rootKey",
  summary:
    "keyhaven extension: changes a webhook endpoint's url, events, description or enabled (what is given; its secret stays). Needs `webhook.*.manage_webhooks` (or `*`).",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "The endpoint as it now is.",
  lookupOnly: ["webhookId"],
  input: z
    .object({
      webhookId,
      url: webhookUrl.optional(),
      events: webhookEvents.optional(),
      description: webhookDescription.nullable().optional().describe("A note for people; null removes it."),
      enabled: z.boolean().optional().describe("false: nothing is sent to it; what is pending waits until it is enabled again."),
    })
    .strict()
    .refine((i) => i.url !== undefined || i.events !== undefined || i.description !== undefined || i.enabled !== undefined, {
      error: "give at least one of url, events, description, enabled",
      path: ["webhookId"],
    }),
  output: webhookSchema,
  handler: async (input, { deps, caller }) => {
    const { webhookId: id, ...changes } = input;
    const webhook = await updateWebhookCore(deps, caller, id, changes);
    return { data: webhookOut(webhook) };
  },
});
