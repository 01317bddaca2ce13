import { z } from "zod";
import {
  MAX_WEBHOOK_DESCRIPTION_LENGTH,
  WEBHOOK_EVENTS,
  type WebhookDelivery,
  type WebhookEndpoint,
} from "../../../core/webhooks/webhooks.core.js";
import { MAX_WEBHOOK_URL_LENGTH } from "../../../core/webhooks/webhooks.url.js";

/** An endpoint's URL as the schemas bound it; the core checks the rest (scheme, credentials, its addresses). */
export const webhookUrl = z
  .string()
  .min(1)
  .max(MAX_WEBHOOK_URL_LENGTH)
  .describe(
    "Where events are POSTed: an https (or http) URL of at most 2048 characters, without credentials; its host must be public unless KEYHAVEN_WEBHOOK_ALLOW_PRIVATE=true.",
  );

export const webhookEvents = z
  .array(z.enum(WEBHOOK_EVENTS))
  .min(1)
  .max(WEBHOOK_EVENTS.length)
  .describe(
    "The event types the endpoint is sent: any event of the audit log's catalogue, and the threshold events (key.credits.low, key.expiring, …; docs/webhooks.md).",
  );

export const webhookDescription = z.string().max(MAX_WEBHOOK_DESCRIPTION_LENGTH).describe("A note for people.");

export const webhookId = z.string().min(1).max(255).describe("The endpoint's id (`wh_…`).");

/** An endpoint as the routes answer it: never its secret. */
export const webhookSchema = z.object({
  webhookId: z.string().describe("The endpoint's id."),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string().optional(),
  enabled: z.boolean().describe("Disabled endpoints are sent nothing; what is pending for them waits."),
  createdAt: z.number().describe("Unix ms."),
  updatedAt: z.number().optional().describe("Unix ms."),
});

export function webhookOut(w: WebhookEndpoint): z.input<typeof webhookSchema> {
  const out: z.input<typeof webhookSchema> = {
    webhookId: w.id,
    url: w.url,
    events: w.events,
    enabled: w.enabled,
    createdAt: w.createdAtM,
  };
  if (w.description !== null) out.description = w.description;
  if (w.updatedAtM !== null) out.updatedAt = w.updatedAtM;
  return out;
}

export const deliverySchema = z.object({
  deliveryId: z.string().describe("The message's id (`msg_…`), its `webhook-id` header: the same on every attempt and replay."),
  webhookId: z.string(),
  event: z.string(),
  status: z.enum(["pending", "delivered", "failed"]),
  attempts: z.number().describe("Attempts made so far."),
  createdAt: z.number().describe("Unix ms."),
  updatedAt: z.number().describe("Unix ms."),
  nextAttemptAt: z.number().optional().describe("Pending: when it is tried next (unix ms)."),
  lastResponseCode: z.number().optional().describe("The status the receiver answered the last attempt with."),
  lastError: z.string().optional().describe("Why the last attempt failed, in a few words."),
  recentAttempts: z
    .array(
      z.object({
        attempt: z.number(),
        time: z.number().describe("Unix ms."),
        responseCode: z.number().optional(),
        error: z.string().optional(),
        durationMs: z.number(),
      }),
    )
    .describe("The latest attempts, newest first (at most 10)."),
});

export function deliveryOut(d: WebhookDelivery): z.input<typeof deliverySchema> {
  const out: z.input<typeof deliverySchema> = {
    deliveryId: d.id,
    webhookId: d.webhookId,
    event: d.event,
    status: d.status,
    attempts: d.attempts,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    recentAttempts: d.recentAttempts,
  };
  if (d.nextAttemptAt !== undefined) out.nextAttemptAt = d.nextAttemptAt;
  if (d.lastResponseCode !== undefined) out.lastResponseCode = d.lastResponseCode;
  if (d.lastError !== undefined) out.lastError = d.lastError;
  return out;
}
