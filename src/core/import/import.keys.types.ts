import type { QueuedKeySettings } from "../../storage/import/import.rows.js";

/** A key's secret as an import gives it: exactly one of its plaintext or its SHA-256 (standard padded base64). */
export type ImportedSecret = {
  plaintext?: string | undefined;
  hash?: { value: string; variant: "sha256_base64" } | undefined;
};

/** One key of migrations.enqueueKeys, after the adapter's validation: its settings and its secret. */
export type EnqueueKey = QueuedKeySettings & ImportedSecret;

/** One key of an import (migrations.createKeys, or a queued batch): into which API, and the identity it links to. */
export type ImportKey = Omit<EnqueueKey, "ratelimit"> & {
  apiId: string;
  externalId?: string | undefined;
  /** The key's `default` rate limit: `limit` per `refillInterval` ms (v1's older shape, as createKeys takes it). */
  ratelimit?:
    | {
        async?: boolean | undefined;
        type?: "fast" | "consistent" | undefined;
        limit: number;
        refillRate: number;
        refillInterval: number;
      }
    | undefined;
};
