import { z } from "zod";
import { replayWebhookDelivery as replayWebhookDeliveryCore } from "../../../core/webhooks/webhooks.core.js";
import { defineV2Rpc } from "../rpc.js";

export const replayWebhookDelivery = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.replayWebhookDelivery",
  auth: "rootKey",
  summary:
    "keyhaven extension: sends a delivery again, whatever its state: pending and due now, its retry schedule restarted, with the same `webhook-id` (receivers dedupe by it). Needs `webhook.*.manage_webhooks` (or `*`).",
  errors: [400, 401, 403, 404, 503],
  returns: "The delivery and its endpoint.",
  lookupOnly: ["deliveryId"],
  input: z.object({ deliveryId: z.string().min(1).max(255).describe("The delivery's id (`msg_…`).") }).strict(),
  output: z.object({ deliveryId: z.string(), webhookId: z.string() }),
  handler: async (input, { deps, caller }) => {
    const replayed = await replayWebhookDeliveryCore(deps, caller, input.deliveryId);
    return { data: replayed };
  },
});
