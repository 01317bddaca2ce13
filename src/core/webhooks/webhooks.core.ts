import { randomBytes } from "node:crypto";
import { InvalidInputError, NotFoundError, PreconditionFailedError } from "../../errors.js";
import { newId } from "../../ids.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import {
  countWebhookEndpoints,
  type DeliveryPosition,
  type DeliveryStatus,
  deleteWebhookEndpoint,
  findWebhookEndpoint,
  insertWebhookEndpoint,
  listWebhookAttempts,
  listWebhookDeliveries as listDeliveryRows,
  listWebhookEndpoints,
  replayWebhookDelivery as replayDeliveryRow,
  updateWebhookEndpoint,
  type WebhookEndpoint,
  type WebhookEndpointChanges,
} from "../../storage/webhooks/webhooks.repository.js";
import { AUDIT_EVENTS } from "../audit/audit.events.js";
import { THRESHOLD_EVENTS } from "./webhooks.alerts.js";
import type { PermissionQuery } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import { requirePermission } from "../principal.js";
import { checkWebhookUrl } from "./webhooks.url.js";

export type { WebhookEndpoint };

/** The permission that lets a root key manage its workspace's webhooks (besides `*`). */
export const MANAGE_WEBHOOKS = "webhook.*.manage_webhooks";
const MANAGE_WEBHOOKS_QUERY: PermissionQuery = { or: ["*", MANAGE_WEBHOOKS] };

/** Every event an endpoint may subscribe to: every event of the audit catalogue, and the threshold events (docs/webhooks.md). */
export const WEBHOOK_EVENTS = [...AUDIT_EVENTS, ...THRESHOLD_EVENTS] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** Endpoints one workspace may have: each change fans out to each, so the bound is the work per change. */
export const MAX_WEBHOOKS_PER_WORKSPACE = 20;
export const MAX_WEBHOOK_DESCRIPTION_LENGTH = 512;
export const DEFAULT_DELIVERY_PAGE = 50;
export const MAX_DELIVERY_PAGE = 100;
/** The attempts listed with each delivery, newest first. */
export const ATTEMPTS_PER_DELIVERY = 10;

export type WebhookServices = {
  db: Db;
  changes: WriteGate;
  keyring: Keyring;
  clock: { now(): number };
  config: { webhookAllowPrivate: boolean };
  webhookWorker?: { wake(): void } | undefined;
};

/** A new endpoint's signing secret as Standard Webhooks writes one: `whsec_` and 32 random bytes in base64. */
function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

/** The URL refused by the one rule (webhooks.url.ts), as the client's 400 naming the field. */
async function requireAcceptedUrl(services: WebhookServices, url: string): Promise<void> {
  const check = await checkWebhookUrl(url, services.config.webhookAllowPrivate);
  if (!check.ok) throw new InvalidInputError({ kind: "webhookInputRefused", problem: check.problem });
}

/** What the audit log names an endpoint by: its host, never the whole URL (a query string may carry a receiver's token). */
function targetOf(id: string, url: string) {
  return { type: "webhook", id, name: new URL(url).host };
}

const distinct = (events: readonly string[]) => [...new Set(events)];

/**
 * Creates an endpoint of the caller's workspace, enabled, sent `events`; answers it with its signing secret, which is
 * stored sealed under the workspace's data key and never shown again.
 */
export async function createWebhook(
  services: WebhookServices,
  caller: Caller,
  input: { url: string; events: readonly WebhookEvent[]; description?: string | undefined },
): Promise<{ webhook: WebhookEndpoint; secret: string }> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  requireDescription(input.description);
  await requireAcceptedUrl(services, input.url);
  const { keyring, db } = services;
  const dataKey = await keyring.dataKeyFor(db, caller.workspaceId);
  const id = newId("wh");
  const secret = newSigningSecret();
  const now = services.clock.now();
  const events = distinct(input.events);
  const webhook = await services.changes.change(caller, async (tx, record) => {
    if ((await countWebhookEndpoints(tx, caller.workspaceId)) >= MAX_WEBHOOKS_PER_WORKSPACE) {
      throw new PreconditionFailedError(
        "webhook",
        `a workspace has at most ${MAX_WEBHOOKS_PER_WORKSPACE} webhook endpoints: delete one before creating another`,
      );
    }
    await insertWebhookEndpoint(
      tx,
      {
        id,
        workspaceId: caller.workspaceId,
        url: input.url,
        events,
        description: input.description ?? null,
        secretEncrypted: keyring.encrypt(dataKey, id, secret),
        encryptionKeyId: dataKey.id,
        enabled: true,
        createdAtM: now,
      },
      dataKey.newRow,
    );
    record({
      event: "webhook.create",
      targets: [targetOf(id, input.url)],
      description: `created webhook endpoint ${id}`,
      details: { events },
    });
    return (await findWebhookEndpoint(tx, caller.workspaceId, id))!;
  });
  if (dataKey.newRow) services.changes.afterCommit(caller, () => keyring.remember(dataKey));
  return { webhook, secret };
}

export async function listWebhooks(services: WebhookServices, caller: Caller): Promise<WebhookEndpoint[]> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  return listWebhookEndpoints(services.db, caller.workspaceId);
}

export async function getWebhook(services: WebhookServices, caller: Caller, webhookId: string): Promise<WebhookEndpoint> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  const webhook = await findWebhookEndpoint(services.db, caller.workspaceId, webhookId);
  if (!webhook) throw new NotFoundError("webhook", webhookId);
  return webhook;
}

/** Changes what is given of an endpoint (its URL checked again); its secret stays. */
export async function updateWebhook(
  services: WebhookServices,
  caller: Caller,
  webhookId: string,
  changes: { url?: string; events?: readonly WebhookEvent[]; description?: string | null; enabled?: boolean },
): Promise<WebhookEndpoint> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  requireDescription(changes.description);
  // A missing endpoint is a 404 before its new URL is resolved (a lookup may take seconds).
  if (!(await findWebhookEndpoint(services.db, caller.workspaceId, webhookId))) throw new NotFoundError("webhook", webhookId);
  if (changes.url !== undefined) await requireAcceptedUrl(services, changes.url);
  const set: WebhookEndpointChanges = {};
  if (changes.url !== undefined) set.url = changes.url;
  if (changes.events !== undefined) set.events = distinct(changes.events);
  if (changes.description !== undefined) set.description = changes.description;
  if (changes.enabled !== undefined) set.enabled = changes.enabled;
  const fields = Object.keys(set);
  return services.changes.change(caller, async (tx, record) => {
    const current = await findWebhookEndpoint(tx, caller.workspaceId, webhookId, true);
    if (!current) throw new NotFoundError("webhook", webhookId);
    if (set.enabled === true && !current.hasSecret) {
      throw new PreconditionFailedError(
        "webhook",
        "this endpoint's signing secret was forgotten by keyhaven reset-encryption-key: create a new endpoint instead",
      );
    }
    const updated = (await updateWebhookEndpoint(tx, caller.workspaceId, webhookId, set, services.clock.now()))!;
    record({
      event: "webhook.update",
      targets: [targetOf(webhookId, updated.url)],
      description: `updated webhook endpoint ${webhookId}`,
      details: set.events === undefined ? { fields } : { fields, events: set.events },
    });
    return updated;
  });
}

/** Deletes an endpoint and its deliveries (a pending one is never sent). */
export async function deleteWebhook(services: WebhookServices, caller: Caller, webhookId: string): Promise<void> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  await services.changes.change(caller, async (tx, record) => {
    const current = await findWebhookEndpoint(tx, caller.workspaceId, webhookId, true);
    if (!current) throw new NotFoundError("webhook", webhookId);
    await deleteWebhookEndpoint(tx, caller.workspaceId, webhookId);
    record({ event: "webhook.delete", targets: [targetOf(webhookId, current.url)], description: `deleted webhook endpoint ${webhookId}` });
  });
}

/** A delivery as listed: its state and its latest attempts (status code and short error each). */
export type WebhookDelivery = {
  id: string;
  webhookId: string;
  event: string;
  status: DeliveryStatus;
  attempts: number;
  createdAt: number;
  updatedAt: number;
  /** When it is tried next (pending only). */
  nextAttemptAt?: number;
  lastResponseCode?: number;
  lastError?: string;
  recentAttempts: { attempt: number; time: number; responseCode?: number; error?: string; durationMs: number }[];
};

export type WebhookDeliveryPage = { deliveries: WebhookDelivery[]; cursor?: string; hasMore: boolean };

/** The opaque cursor after `position`: base64url of `<time>.<id>` (the audit log's form). */
export function encodeDeliveryCursor(position: DeliveryPosition): string {
  return Buffer.from(`${position.createdAtM}.${position.id}`, "utf8").toString("base64url");
}

export function decodeDeliveryCursor(cursor: string): DeliveryPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(cursor)) return undefined;
  const match = /^(\d{1,16})\.([A-Za-z0-9_]{1,200})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!match) return undefined;
  const createdAtM = Number(match[1]);
  return Number.isSafeInteger(createdAtM) ? { createdAtM, id: match[2]! } : undefined;
}

/** The endpoint's deliveries, newest first, a page at a time (a 404 for an endpoint the workspace does not have). */
export async function listWebhookDeliveries(
  services: WebhookServices,
  caller: Caller,
  query: { webhookId: string; status?: DeliveryStatus | undefined; limit?: number | undefined; cursor?: string | undefined },
): Promise<WebhookDeliveryPage> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  const webhook = await findWebhookEndpoint(services.db, caller.workspaceId, query.webhookId);
  if (!webhook) throw new NotFoundError("webhook", query.webhookId);
  const limit = Math.min(Math.max(query.limit ?? DEFAULT_DELIVERY_PAGE, 1), MAX_DELIVERY_PAGE);
  const after = query.cursor === undefined ? undefined : decodeDeliveryCursor(query.cursor);
  if (query.cursor !== undefined && after === undefined) throw new TypeError("not a delivery cursor (the adapter validates it)");
  const rows = await listDeliveryRows(services.db, caller.workspaceId, webhook.id, { after, limit: limit + 1, status: query.status });
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const attempts = await listWebhookAttempts(
    services.db,
    page.map((r) => r.id),
    ATTEMPTS_PER_DELIVERY,
  );
  const byDelivery = new Map<string, WebhookDelivery["recentAttempts"]>();
  for (const a of attempts) {
    const list = byDelivery.get(a.deliveryId) ?? [];
    const item: WebhookDelivery["recentAttempts"][number] = { attempt: a.attempt, time: a.atM, durationMs: a.durationMs };
    if (a.status !== null) item.responseCode = a.status;
    if (a.error !== null) item.error = a.error;
    list.push(item);
    byDelivery.set(a.deliveryId, list);
  }
  const deliveries = page.map((r) => {
    const d: WebhookDelivery = {
      id: r.id,
      webhookId: r.endpointId,
      event: r.event,
      status: r.status as DeliveryStatus,
      attempts: r.attempts,
      createdAt: r.createdAtM,
      updatedAt: r.updatedAtM,
      recentAttempts: byDelivery.get(r.id) ?? [],
    };
    if (r.status === "pending") d.nextAttemptAt = r.nextAttemptAtM;
    if (r.lastStatus !== null) d.lastResponseCode = r.lastStatus;
    if (r.lastError !== null) d.lastError = r.lastError;
    return d;
  });
  const last = page.at(-1);
  return { deliveries, hasMore, ...(hasMore && last && { cursor: encodeDeliveryCursor(last) }) };
}

/**
 * Sends a delivery again (delivered, failed or pending alike): pending and due now, its retry schedule restarted, with
 * the same message id. A 404 for a delivery the workspace does not have.
 */
export async function replayWebhookDelivery(
  services: WebhookServices,
  caller: Caller,
  deliveryId: string,
): Promise<{ deliveryId: string; webhookId: string }> {
  requirePermission(caller, MANAGE_WEBHOOKS_QUERY);
  const replayed = await services.changes.change(caller, async (tx, record) => {
    const row = await replayDeliveryRow(tx, caller.workspaceId, deliveryId, services.clock.now());
    if (!row) throw new NotFoundError("webhookDelivery", deliveryId);
    record({
      event: "webhook.replay_delivery",
      targets: [
        { type: "webhook", id: row.endpointId },
        { type: "webhook_delivery", id: deliveryId, name: row.event },
      ],
      description: `replayed webhook delivery ${deliveryId}`,
    });
    return { deliveryId, webhookId: row.endpointId };
  });
  services.changes.afterCommit(caller, () => services.webhookWorker?.wake());
  return replayed;
}

/** Throws the 400 of a description too long (the adapters' schemas bound it too; the console posts a form). */
function requireDescription(description: string | null | undefined): void {
  if (description !== undefined && description !== null && description.length > MAX_WEBHOOK_DESCRIPTION_LENGTH) {
    throw new InvalidInputError({
      kind: "webhookInputRefused",
      problem: `description: must be at most ${MAX_WEBHOOK_DESCRIPTION_LENGTH} characters`,
    });
  }
}
