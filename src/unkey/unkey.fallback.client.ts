/**
 * The server's client of hosted Unkey for the fallback (issue 36 §2): one attempt per call, with a deadline on the
 * whole exchange (connection, answer and body), never a retry (a verification waits on it), and an answer bounded in
 * size and read through the contract's schema. It throws nothing: every failure is a reason, for the fallback's
 * metrics. The Unkey root key is sent only in the Authorization header; no result carries anything of it.
 */
import type { z } from "zod";
import { envelopeOf, keySchema, type UnkeyKey, type UnkeyVerifyAnswer, verifyKeyAnswerSchema } from "./unkey.schemas.js";

/** Why a call gave no usable answer: no answer in time, no connection, a non-2xx status, a body outside the contract. */
export type UnkeyCallFailure = "timeout" | "network" | "status" | "malformed";

export type UnkeyCall<T> = { ok: true; value: T } | { ok: false; reason: UnkeyCallFailure; status?: number };

/** An answer longer than this is malformed: a verifyKey or getKey answer is a few kilobytes at most. */
export const MAX_UNKEY_ANSWER_BYTES = 256 * 1024;

export class UnkeyFallbackClient {
  constructor(private readonly options: { url: string; rootKey: string; timeoutMs: number }) {}

  /** keys.verifyKey with `credits.cost: 0`, so that asking spends nothing of the key upstream. */
  verifyKey(key: string, signal?: AbortSignal): Promise<UnkeyCall<UnkeyVerifyAnswer>> {
    return this.call("keys.verifyKey", { key, credits: { cost: 0 } }, verifyKeyAnswerSchema, signal);
  }

  /** keys.getKey: the key's whole state, for the refresh after an adoption. */
  getKey(keyId: string, signal?: AbortSignal): Promise<UnkeyCall<UnkeyKey>> {
    return this.call("keys.getKey", { keyId }, keySchema, signal);
  }

  private async call<T extends z.ZodType>(
    route: string,
    body: unknown,
    data: T,
    signal: AbortSignal | undefined,
  ): Promise<UnkeyCall<z.output<T>>> {
    const deadline = AbortSignal.timeout(this.options.timeoutMs);
    const abort = signal === undefined ? deadline : AbortSignal.any([deadline, signal]);
    let status: number;
    let text: string;
    try {
      const res = await fetch(`${this.options.url}/v2/${route}`, {
        method: "POST",
        headers: { authorization: `Bearer ${this.options.rootKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: abort,
        redirect: "error",
      });
      status = res.status;
      text = await boundedText(res, MAX_UNKEY_ANSWER_BYTES);
    } catch (err) {
      if (deadline.aborted) return { ok: false, reason: "timeout" };
      if (err instanceof TooLarge) return { ok: false, reason: "malformed", status: 200 };
      return { ok: false, reason: "network" };
    }
    if (status < 200 || status > 299) return { ok: false, reason: "status", status };
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { ok: false, reason: "malformed", status };
    }
    const parsed = envelopeOf(data).safeParse(json);
    if (!parsed.success) return { ok: false, reason: "malformed", status };
    return { ok: true, value: (parsed.data as { data: z.output<T> }).data };
  }
}

class TooLarge extends Error {}

/** The body as text, refusing (TooLarge) one longer than `max` bytes before reading the rest of it. */
async function boundedText(res: Response, max: number): Promise<string> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > max) {
    await res.body?.cancel();
    throw new TooLarge();
  }
  if (res.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > max) throw new TooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
