import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Webhook } from "standardwebhooks";
import { checkWebhookUrl, type ResolvedAddress } from "./webhooks.url.js";

/** What of a receiver's answer is read before it is discarded. */
export const MAX_WEBHOOK_RESPONSE_BYTES = 64 * 1024;

/** One webhook to send: its message id (`webhook-id`), its JSON body exactly as signed, the endpoint and its secret. */
export type WebhookMessage = {
  id: string;
  body: string;
  url: string;
  /** `whsec_<base64>`: never logged, never in an outcome. */
  secret: string;
};

/** How one attempt went: the receiver's status (none when it did not answer) and a short reason unless 2xx. */
export type SendResult = { status: number | null; error: string | null; durationMs: number; permanent?: boolean };

export type SendOptions = {
  allowPrivate: boolean;
  /** The whole attempt, the lookup and the connection included. */
  deadlineMs: number;
  /** The signature's time (`webhook-timestamp`), unix ms. */
  now: number;
  /** Ends the attempt early (the worker stopping). */
  signal?: AbortSignal;
};

/** A short reason an attempt failed, from a socket or HTTP error: a code, never a URL's secret part or a body. */
function reasonOf(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && /^[A-Z0-9_]{2,40}$/.test(code)) return `connection failed (${code})`;
  return "connection failed";
}

/**
 * Sends `message` once: the URL checked again by the rule it was created under (checkWebhookUrl: a host that now
 * resolves inside is refused), the connection made to the very address checked (the `lookup` given to the request
 * answers it, so the host is not resolved a second time; TLS still verifies the certificate for the host's name),
 * signed with `standardwebhooks` (webhook-id, webhook-timestamp, webhook-signature), within one deadline. Redirects are
 * not followed. At most MAX_WEBHOOK_RESPONSE_BYTES of the answer are read, then it is dropped.
 */
export async function sendWebhook(message: WebhookMessage, options: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const deadline = AbortSignal.timeout(options.deadlineMs);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
  const checked = await Promise.race([
    checkWebhookUrl(message.url, options.allowPrivate, options.deadlineMs),
    new Promise<undefined>((resolve) => signal.addEventListener("abort", () => resolve(undefined), { once: true })),
  ]);
  if (checked === undefined) return { status: null, error: `timed out after ${options.deadlineMs} ms`, durationMs: elapsed() };
  if (!checked.ok)
    return { status: null, error: checked.problem.replace(/^url: /, ""), durationMs: elapsed(), permanent: checked.permanent };
  const { url, address } = checked.target;
  const timestamp = new Date(options.now);
  const signature = new Webhook(message.secret).sign(message.id, timestamp, message.body);
  const headers = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(message.body)),
    "user-agent": "keyhaven-webhooks",
    "webhook-id": message.id,
    "webhook-timestamp": String(Math.floor(options.now / 1000)),
    "webhook-signature": signature,
  };
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (result: Omit<SendResult, "durationMs">) => {
      if (settled) return;
      settled = true;
      resolve({ status: result.status, error: result.error, durationMs: elapsed() });
    };
    const request = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, {
      method: "POST",
      headers,
      lookup: fixedLookup(address),
      signal,
      agent: false,
    });
    request.on("response", (response: IncomingMessage) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      response.on("data", (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_WEBHOOK_RESPONSE_BYTES) response.destroy();
      });
      const done = () => finish({ status, error: status >= 200 && status < 300 ? null : `answered ${status}` });
      response.on("end", done);
      response.on("close", done);
      response.on("error", done);
    });
    request.on("error", (err) => {
      if (signal.aborted) finish({ status: null, error: deadline.aborted ? `timed out after ${options.deadlineMs} ms` : "stopped" });
      else finish({ status: null, error: reasonOf(err) });
    });
    request.end(message.body);
  });
}

/** A `lookup` that answers the address already checked, in whichever form the socket asks for. */
function fixedLookup(resolved: ResolvedAddress): LookupFunction {
  return ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address: resolved.address, family: resolved.family }]);
    else callback(null, resolved.address, resolved.family);
  }) as unknown as LookupFunction;
}
