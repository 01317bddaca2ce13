import type { DataKey } from "../crypto/encryptionKeys.repository.js";
import type { KeyDefaultRatelimit, KeyNamedRatelimit } from "../keys/keys.ratelimit.repository.js";
import type { KeyLink } from "../keys/keys.rbac.repository.js";
import type { encryptedKeys, keys } from "../schema.js";

/** Rows of the tables an import writes, as schema.ts declares them (storage/bulk.ts maps fields to columns). */
export type KeyRow = typeof keys.$inferInsert;

/** Every row one import writes, built before the transaction that only inserts them (insertImport). */
export type ImportPlan = {
  workspaceId: string;
  /** When the rows are created (their `created_at_m`). */
  now: number;
  keys: KeyRow[];
  /** The externalIds whose identities the keys link to (created when the workspace has none yet). */
  identities: Set<string>;
  /** Per key index: the externalId whose identity it links to. */
  externalIds: (string | undefined)[];
  encrypted: (typeof encryptedKeys.$inferInsert)[];
  keyRoles: KeyLink[];
  keyPermissions: KeyLink[];
  /** The keys' `default` rate limits. */
  ratelimits: KeyDefaultRatelimit[];
  /** The keys' named rate limits (v2's keys.migrateKeys); none for v1's imports. */
  namedRatelimits?: KeyNamedRatelimit[] | undefined;
  /** `meta` of the identities the import creates: null for v1's imports (as v1 stores), `{}` for v2's. */
  identityMeta?: Record<string, never> | null | undefined;
  dataKey: DataKey | undefined;
};

/** A key's secret part, settled before its rows are built: its id, hash, `start`, and sealed plaintext if any. */
export type SealedKey = {
  id: string;
  hash: string;
  start: string;
  /** The plaintext, AES-256-GCM under the data key `encryptionKeyId`, bound to this id and the workspace. */
  encrypted: string | null;
  encryptionKeyId: string | null;
};

/**
 * The settings every new key may carry, however it is made (keys.createKey, an import): its display prefix, name,
 * metadata, roles and permissions by name, expiry (unix ms; undefined: never), uses left (undefined: unlimited)
 * with their refill, enabled flag and environment label.
 */
export type KeySettings = {
  prefix?: string | undefined;
  name?: string | undefined;
  meta?: Record<string, unknown> | undefined;
  roles?: string[] | undefined;
  permissions?: string[] | undefined;
  expires?: number | undefined;
  remaining?: number | undefined;
  refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number | undefined } | undefined;
  enabled?: boolean | undefined;
  environment?: string | undefined;
};

/**
 * A queued key's settings as `migration_batches.keys` holds them (JSON): what migrations.enqueueKeys was given for
 * the key, less its secret (kept sealed beside it).
 */
export type QueuedKeySettings = KeySettings & {
  start?: string | undefined;
  ownerId?: string | undefined;
  ratelimit?:
    | {
        async?: boolean | undefined;
        type?: "fast" | "consistent" | undefined;
        limit: number;
        duration: number;
        refillRate?: number | undefined;
        refillInterval?: number | undefined;
      }
    | undefined;
};

/** A key as it waits in `migration_batches.keys`: its settings without plaintext or hash, and its sealed secret. */
export type QueuedKey = QueuedKeySettings & { sealed: SealedKey };
