import { z } from "zod";
import {
  DEFAULT_DELIVERY_PAGE,
  decodeDeliveryCursor,
  listWebhookDeliveries as listWebhookDeliveriesCore,
  MAX_DELIVERY_PAGE,
} from "../../../core/webhooks/webhooks.core.js";
import { defineV2Rpc } from "../rpc.js";
import { deliveryOut, deliverySchema, webhookId } from "./webhooks.schemas.js";

export const listWebhookDeliveries = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.listWebhookDeliveries",
  auth: "rootKey",
  summary:
    "keyhaven extension: a webhook endpoint's deliveries, newest first, with their status, response codes and latest attempts, a page at a time. Needs `webhook.*.manage_webhooks` (or `*`). Never a payload or a secret.",
  errors: [400, 401, 403, 404, 503],
  returns: "A page of deliveries, newest first.",
  paginated: true,
  lookupOnly: ["webhookId"],
  input: z
    .object({
      webhookId,
      status: z.enum(["pending", "delivered", "failed"]).optional().describe("Only deliveries in this state."),
      limit: z
        .int()
        .min(1)
        .max(MAX_DELIVERY_PAGE)
        .optional()
        .describe(`Deliveries per page, 1 to ${MAX_DELIVERY_PAGE} (default ${DEFAULT_DELIVERY_PAGE}).`),
      cursor: z
        .string()
        .max(1024)
        .refine((c) => decodeDeliveryCursor(c) !== undefined, "is not a cursor this route returned")
        .optional()
        .describe("The `pagination.cursor` of the previous page."),
    })
    .strict(),
  output: z.array(deliverySchema),
  handler: async (input, { deps, caller }) => {
    const page = await listWebhookDeliveriesCore(deps, caller, input);
    return {
      data: page.deliveries.map(deliveryOut),
      pagination: { hasMore: page.hasMore, ...(page.cursor !== undefined && { cursor: page.cursor }) },
    };
  },
});
