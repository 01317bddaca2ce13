import { sql } from "drizzle-orm";
import type { Refusal } from "../errors.js";
import {
  bigint,
  bigserial,
  boolean,
  check,
  customType,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

export { MAX_INT32 } from "./int32.js";

// Timestamps ending in `_at_m` are unix milliseconds, as on the wire. `expires` and `last_refill_at` are
// timestamptz because the refill and expiry rules are computed in SQL.
const ms = (name: string) => bigint(name, { mode: "number" });
/** Raw bytes (a digest); never read back by the code. */
const bytea = customType<{ data: Uint8Array }>({ dataType: () => "bytea" });

/** Small key/value table for facts about this installation (the default workspace id). */
export const settings = pgTable("keyhaven_settings", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
});

export const workspaces = pgTable("workspaces", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  enabled: boolean("enabled").notNull().default(true),
  createdAtM: ms("created_at_m").notNull(),
  updatedAtM: ms("updated_at_m"),
});

export const rootKeys = pgTable(
  "root_keys",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    // SHA-256 of the root key, standard base64. The key itself is never stored.
    hash: text("hash").notNull(),
    start: text("start").notNull(),
    name: text("name"),
    permissions: text("permissions").array().notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [uniqueIndex("root_keys_hash_idx").on(t.hash), index("root_keys_workspace_idx").on(t.workspaceId)],
);

/** An API and its keyspace (upstream split these into `apis` and `key_auth`; one row serves both here). */
export const apis = pgTable(
  "apis",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    storeEncryptedKeys: boolean("store_encrypted_keys").notNull().default(false),
    defaultPrefix: text("default_prefix"),
    defaultBytes: integer("default_bytes"),
    deleteProtection: boolean("delete_protection").notNull().default(false),
    /** v1's IP allow-list: comma-separated addresses; null (or empty) lets every caller verify (src/core/apis/apis.ipWhitelist.ts). */
    ipWhitelist: text("ip_whitelist"),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
    deletedAtM: ms("deleted_at_m"),
  },
  (t) => [index("apis_workspace_idx").on(t.workspaceId)],
);

export const identities = pgTable(
  "identities",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    externalId: text("external_id").notNull(),
    environment: text("environment").notNull().default("default"),
    meta: jsonb("meta"),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
  },
  (t) => [uniqueIndex("identities_workspace_external_id_idx").on(t.workspaceId, t.externalId)],
);

export const keys = pgTable(
  "keys",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    apiId: text("api_id")
      .notNull()
      .references(() => apis.id, { onDelete: "cascade" }),
    // SHA-256 (standard base64) of the key, or the imported hash as given. Unique across every workspace,
    // because verification looks a key up by its hash alone. Null while the key is pending: copied from hosted Unkey
    // with every setting but no hash (Unkey never returns one), until its first verification adopts it (issue 36).
    hash: text("hash"),
    start: text("start").notNull(),
    prefix: text("prefix"),
    name: text("name"),
    ownerId: text("owner_id"),
    identityId: text("identity_id").references(() => identities.id, { onDelete: "set null" }),
    meta: jsonb("meta"),
    expires: timestamp("expires", { withTimezone: true, precision: 3, mode: "date" }),
    remaining: integer("remaining_requests"),
    refillDay: smallint("refill_day"),
    refillAmount: integer("refill_amount"),
    lastRefillAt: timestamp("last_refill_at", { withTimezone: true, precision: 3, mode: "date" }),
    enabled: boolean("enabled").notNull().default(true),
    environment: text("environment"),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
    deletedAtM: ms("deleted_at_m"),
    // The v2 migration (key_migrations) that imported the key by a hash of its algorithm; null once the key has been
    // verified and rehashed (a prefixed-api-key migration), or when it was not migrated by v2's keys.migrateKeys.
    pendingMigrationId: text("pending_migration_id"),
    // When a pending key (hash null) was adopted: its first verification presented a key hosted Unkey knew by this id.
    adoptedAtM: ms("adopted_at_m"),
    // The key's starting credits, the base of a percentage threshold of key.credits.low when it has no refill
    // (docs/webhooks.md): its remaining uses when they were first changed (so as created), or last raised. Kept by the
    // keys_credits_start trigger (migration alerts); null until remaining first changes.
    creditsStart: integer("credits_start"),
  },
  (t) => [
    uniqueIndex("keys_hash_idx").on(t.hash),
    index("keys_api_idx").on(t.apiId, t.deletedAtM),
    // listKeys pages an API's live keys in id order: this serves each page without sorting the whole API.
    index("keys_live_by_api_idx").on(t.apiId, t.id).where(sql`${t.deletedAtM} is null`),
    index("keys_workspace_idx").on(t.workspaceId),
    index("keys_owner_idx").on(t.ownerId),
    index("keys_identity_idx").on(t.identityId),
    // Pending keys (no hash yet) per workspace: counted for the fallback's "has pending keys" and listed for review.
    index("keys_pending_idx").on(t.workspaceId, t.apiId).where(sql`${t.hash} is null and ${t.deletedAtM} is null`),
    // The console's search of an API's keys (apis.core.ts searchApiKeys): a prefix of the name (any case) or of the start.
    index("keys_name_prefix_idx").on(t.apiId, sql`lower(${t.name}) text_pattern_ops`).where(sql`${t.deletedAtM} is null`),
    index("keys_start_prefix_idx").on(t.apiId, t.start.op("text_pattern_ops")).where(sql`${t.deletedAtM} is null`),
    // The console's filters of an API's keys: the disabled ones in id order, the ones that expire by their expiry.
    index("keys_disabled_by_api_idx").on(t.apiId, t.id).where(sql`${t.deletedAtM} is null and ${t.enabled} = false`),
    index("keys_expiring_by_api_idx").on(t.apiId, t.expires).where(sql`${t.deletedAtM} is null and ${t.expires} is not null`),
    check("keys_remaining_not_negative", sql`${t.remaining} >= 0`),
  ],
);

/** How the keys of a v2 migration (keys.migrateKeys) were hashed: `KEY_MIGRATION_ALGORITHMS`. */
export const KEY_MIGRATION_ALGORITHMS = ["sha256", "github.com/seamapi/prefixed-api-key"] as const;
export type KeyMigrationAlgorithm = (typeof KEY_MIGRATION_ALGORITHMS)[number];

/**
 * v2's migrations (upstream `key_migrations`): an id of the workspace's choosing and how its keys' hashes were made.
 * Ids are unique per workspace, not across workspaces as upstream's (where support creates them): with self-serve
 * ids, one namespace for all would let a workspace learn another's ids (not found against created) and claim them.
 */
export const keyMigrations = pgTable(
  "key_migrations",
  {
    id: text("id").notNull(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    algorithm: text("algorithm").$type<KeyMigrationAlgorithm>().notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.workspaceId, t.id] }),
    check("key_migrations_algorithm", sql`${t.algorithm} in ('sha256', 'github.com/seamapi/prefixed-api-key')`),
  ],
);

/** Plaintext of imported (or recoverable) keys, AES-256-GCM under the workspace's data key. */
export const encryptedKeys = pgTable("encrypted_keys", {
  keyId: text("key_id")
    .primaryKey()
    .references(() => keys.id, { onDelete: "cascade" }),
  // No foreign key: the key row already belongs to the workspace and cascades; a second check per row costs
  // about a third of this table's insert time in a bulk import.
  workspaceId: text("workspace_id").notNull(),
  // base64(nonce || ciphertext || tag); the key id and workspace id are bound in as associated data.
  encrypted: text("encrypted").notNull(),
  encryptionKeyId: text("encryption_key_id")
    .notNull()
    .references(() => encryptionKeys.id),
  createdAtM: ms("created_at_m").notNull(),
});

/** Per-workspace data keys, each wrapped (AES-256-GCM) by KEYHAVEN_ENCRYPTION_KEY. */
export const encryptionKeys = pgTable(
  "encryption_keys",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    wrapped: text("wrapped").notNull(),
    // First bytes of SHA-256 of the master key, so a wrong KEYHAVEN_ENCRYPTION_KEY is told apart from corrupt data.
    masterKeyFingerprint: text("master_key_fingerprint").notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [index("encryption_keys_workspace_idx").on(t.workspaceId, t.createdAtM)],
);

export const permissions = pgTable(
  "permissions",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    slug: text("slug").notNull(),
    description: text("description"),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
  },
  (t) => [
    uniqueIndex("permissions_workspace_slug_idx").on(t.workspaceId, t.slug),
    index("permissions_workspace_name_idx").on(t.workspaceId, t.name),
  ],
);

export const roles = pgTable(
  "roles",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    description: text("description"),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
  },
  (t) => [uniqueIndex("roles_workspace_name_idx").on(t.workspaceId, t.name)],
);

export const keysRoles = pgTable(
  "keys_roles",
  {
    keyId: text("key_id")
      .notNull()
      .references(() => keys.id, { onDelete: "cascade" }),
    roleId: text("role_id")
      .notNull()
      .references(() => roles.id, { onDelete: "cascade" }),
    workspaceId: text("workspace_id").notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.roleId] }), index("keys_roles_role_idx").on(t.roleId)],
);

export const keysPermissions = pgTable(
  "keys_permissions",
  {
    keyId: text("key_id")
      .notNull()
      .references(() => keys.id, { onDelete: "cascade" }),
    permissionId: text("permission_id")
      .notNull()
      .references(() => permissions.id, { onDelete: "cascade" }),
    workspaceId: text("workspace_id").notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.permissionId] }), index("keys_permissions_permission_idx").on(t.permissionId)],
);

export const rolesPermissions = pgTable(
  "roles_permissions",
  {
    roleId: text("role_id")
      .notNull()
      .references(() => roles.id, { onDelete: "cascade" }),
    permissionId: text("permission_id")
      .notNull()
      .references(() => permissions.id, { onDelete: "cascade" }),
    workspaceId: text("workspace_id").notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [primaryKey({ columns: [t.roleId, t.permissionId] }), index("roles_permissions_permission_idx").on(t.permissionId)],
);

/** Named rate limits of a key or of an identity; the key's limit named `default` is applied automatically. */
export const ratelimits = pgTable(
  "ratelimits",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    keyId: text("key_id").references(() => keys.id, { onDelete: "cascade" }),
    identityId: text("identity_id").references(() => identities.id, { onDelete: "cascade" }),
    limit: integer("limit").notNull(),
    duration: ms("duration").notNull(),
    autoApply: boolean("auto_apply").notNull().default(false),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
  },
  (t) => [
    uniqueIndex("ratelimits_key_name_idx").on(t.keyId, t.name),
    uniqueIndex("ratelimits_identity_name_idx").on(t.identityId, t.name),
    check("ratelimits_owner", sql`(${t.keyId} is null) <> (${t.identityId} is null)`),
  ],
);

/** Namespaces of standalone rate limits (`ratelimits.limit`); a name is unique among a workspace's live ones. */
export const ratelimitNamespaces = pgTable(
  "ratelimit_namespaces",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
    deletedAtM: ms("deleted_at_m"),
  },
  (t) => [uniqueIndex("ratelimit_namespaces_workspace_name_idx").on(t.workspaceId, t.name).where(sql`${t.deletedAtM} is null`)],
);

/**
 * Per-identifier limits of a namespace. `identifier` may contain `*` (any run of characters). One row per
 * (namespace, identifier), deleted ones included, so setting a deleted override again revives its row and id.
 */
export const ratelimitOverrides = pgTable(
  "ratelimit_overrides",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    namespaceId: text("namespace_id")
      .notNull()
      .references(() => ratelimitNamespaces.id, { onDelete: "cascade" }),
    identifier: text("identifier").notNull(),
    limit: integer("limit").notNull(),
    duration: ms("duration").notNull(),
    async: boolean("async").notNull().default(false),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
    deletedAtM: ms("deleted_at_m"),
  },
  (t) => [
    uniqueIndex("ratelimit_overrides_namespace_identifier_idx").on(t.namespaceId, t.identifier),
    // listOverrides pages a namespace's live overrides by id.
    index("ratelimit_overrides_live_by_namespace_idx").on(t.namespaceId, t.id).where(sql`${t.deletedAtM} is null`),
    // ratelimits.limit scans only a namespace's live wildcard overrides after the exact lookup.
    index("ratelimit_overrides_wildcards_idx").on(t.namespaceId).where(sql`${t.deletedAtM} is null and strpos(${t.identifier}, '*') > 0`),
  ],
);

/**
 * Batches of `migrations.enqueueKeys`, waiting for (or done by) the migration worker. `keys` holds each key's
 * settings with its secret already sealed (id, hash, ciphertext of a plaintext): never a plaintext.
 */
export const migrationBatches = pgTable(
  "migration_batches",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    migrationId: text("migration_id").notNull(),
    apiId: text("api_id").notNull(),
    // The keys' settings and sealed secrets (hash, ciphertext). Null once the batch is done, or failed in a way a
    // retry cannot fix: the queue must not keep, beyond the import, what could restore a key deleted since.
    keys: jsonb("keys"),
    keyCount: integer("key_count").notNull(),
    // pending, then done (every key imported) or failed (some or all not imported: see migration_errors).
    status: text("status").notNull().default("pending"),
    imported: integer("imported").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    // Attempts that ended in a transient failure (connection, timeout, lock, serialization); retried with backoff.
    attempts: integer("attempts").notNull().default(0),
    // A pending batch is not claimed before this time (unix ms); null: at once.
    nextAttemptAtM: ms("next_attempt_at_m"),
    // What the last failed attempt ended with (an SQLSTATE or a kind of failure, never a value).
    lastError: text("last_error"),
    createdAtM: ms("created_at_m").notNull(),
    processedAtM: ms("processed_at_m"),
  },
  (t) => [
    // The worker claims the oldest pending batch: this index holds only those.
    index("migration_batches_pending_idx").on(t.id).where(sql`${t.status} = 'pending'`),
    index("migration_batches_migration_idx").on(t.workspaceId, t.migrationId),
  ],
);

/** Why keys of an enqueued batch were not imported: per key (`key_index`), or for the whole batch (null). */
export const migrationErrors = pgTable(
  "migration_errors",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    batchId: bigint("batch_id", { mode: "number" })
      .notNull()
      .references(() => migrationBatches.id, { onDelete: "cascade" }),
    workspaceId: text("workspace_id").notNull(),
    migrationId: text("migration_id").notNull(),
    keyIndex: integer("key_index"),
    // Rows written before `refusal` existed: the code and text shown, as stored. Since: the refusal's kind and its
    // neutral log text (describeRefusal); what a client is shown is worded from `refusal` by its wire adapter.
    code: text("code").notNull(),
    message: text("message").notNull(),
    // Why, as the core's refusal (a kind and its facts, src/errors.ts); null on rows written before it existed.
    refusal: jsonb("refusal").$type<Refusal>(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [index("migration_errors_migration_idx").on(t.workspaceId, t.migrationId, t.batchId)],
);

/**
 * Verification outcomes counted per key, UTC hour, outcome and tags (as sent), upserted by the analytics
 * flusher. The workspace and API are the key's, read when the counts are written. A tag set is identified by its
 * digest (`tags_hash`, computed by the database from `tags`, so no writer can store one that does not match), not
 * its text: upstream accepts 20 tags of 512 characters, up to 40 KiB in UTF-8, and a primary key holding the text
 * could not index it (PostgreSQL's btree entries stop at 8,191 bytes: the failed write stopped every count).
 */
export const verificationCounts = pgTable(
  "verification_counts",
  {
    keyId: text("key_id").notNull(),
    hourM: ms("hour_m").notNull(),
    outcome: text("outcome").notNull(),
    tags: text("tags").array().notNull().default(sql`'{}'::text[]`),
    // keyhaven_tags_hash (migration 0016): sha256 of the array's text form, which PostgreSQL writes one way only.
    tagsHash: bytea("tags_hash").notNull().generatedAlwaysAs(sql`keyhaven_tags_hash(tags)`),
    workspaceId: text("workspace_id").notNull(),
    apiId: text("api_id").notNull(),
    identityId: text("identity_id"),
    count: bigint("count", { mode: "number" }).notNull(),
    // The credits the counted verifications spent, and the sum of the ms they took in keyhaven (migration 0023): the
    // hour, day and month aggregates answer spent_credits and latency_avg (latency_sum / count) from them.
    spentCredits: bigint("spent_credits", { mode: "number" }).notNull().default(0),
    latencySum: doublePrecision("latency_sum").notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.keyId, t.hourM, t.outcome, t.tagsHash] }),
    index("verification_counts_api_hour_idx").on(t.workspaceId, t.apiId, t.hourM),
  ],
);

/**
 * The raw verification log (issue 38 §2): every verification the analytics count (the same population as
 * `verification_counts`), written by the verification log's flusher about once a second (storage/verificationLog) as
 * one row per workspace and flush holding that second's verifications as a JSON array (`events`, each event an array:
 * request id, unix ms, key space (the key's API), key, identity, external id, outcome, tags, credits spent, latency in
 * ms). A row per verification cost the embedded store 20 µs of keyhaven's own thread per verification (a heap tuple
 * and two index entries each), a chunk about 4: docs/benchmarks.md. Read through the view `key_verifications_log`
 * (migration verification_log), whose columns are upstream's raw table's; kept KEYHAVEN_VERIFICATION_LOG_DAYS days and
 * at most KEYHAVEN_VERIFICATION_LOG_MAX_ROWS verifications per workspace. Never a key or its hash.
 */
export const keyVerificationChunks = pgTable(
  "key_verification_chunks",
  {
    workspaceId: text("workspace_id").notNull(),
    /** The oldest and newest verification of the chunk (unix ms). */
    fromM: ms("from_m").notNull(),
    toM: ms("to_m").notNull(),
    /** How many verifications `events` holds. */
    n: integer("n").notNull(),
    /** The instance that verified (KEYHAVEN_REGION). */
    region: text("region").notNull(),
    events: jsonb("events").notNull(),
  },
  (t) => [
    index("key_verification_chunks_workspace_to_idx").on(t.workspaceId, t.toM),
    // The pruning's: the chunks that straddle the retention's cutoff.
    index("key_verification_chunks_workspace_from_idx").on(t.workspaceId, t.fromM),
  ],
);

/**
 * When each key was last verified (issue 38 §1, v2's `lastUsedAt`), as the last-used flusher writes it about once a
 * second (storage/lastUsed): the latest verification it saw, never moved back. Not a column of `keys`: an update of
 * `keys` moves the verification epoch (migration verification_epoch), so writing it every second would drop hot keys
 * from every replica's cache. No foreign key (its check would lock the key's row on every first write, and a key
 * deleted while its time was in flight would refuse the whole statement): a delete trigger on `keys` removes the row
 * (migration key_last_used), and what a race leaves is swept (LastUsed.deleteOrphans).
 */
export const keyLastUsed = pgTable("key_last_used", {
  keyId: text("key_id").primaryKey(),
  lastUsedAtM: ms("last_used_at_m").notNull(),
});

/** When each root key last authenticated, as keyLastUsed is kept for keys (`root_keys` has an epoch trigger too). */
export const rootKeyLastUsed = pgTable("root_key_last_used", {
  rootKeyId: text("root_key_id").primaryKey(),
  lastUsedAtM: ms("last_used_at_m").notNull(),
});

/** One target of an audit entry: what the change touched. `name` is for people (an API's name, a role's). */
export type AuditTarget = { type: string; id: string; name?: string | undefined };

/**
 * The audit log (core/changes.ts writes it, in the same transaction as the change it records; docs/audit.md). Never
 * a secret in it: no key, hash, root key, ciphertext or admin token; `meta` values only as the operator allows.
 * `workspace_id` is null for what happens above every workspace (an operator's rotation of the encryption key).
 * Listed newest first by (created_at_m, id): the id breaks ties within a millisecond, so a cursor is exact.
 */
export const auditLog = pgTable(
  "audit_log",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id"),
    event: text("event").notNull(),
    actorKind: text("actor_kind").notNull(),
    actorId: text("actor_id").notNull(),
    actorName: text("actor_name").notNull(),
    targets: jsonb("targets").$type<AuditTarget[]>().notNull(),
    description: text("description").notNull(),
    /** What else the entry says: which fields changed (names, not values, by default), counts. */
    details: jsonb("details").$type<Record<string, unknown>>(),
    surface: text("surface").notNull(),
    requestId: text("request_id"),
    clientAddress: text("client_address"),
    userAgent: text("user_agent"),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [
    index("audit_log_workspace_time_idx").on(t.workspaceId, t.createdAtM, t.id),
    index("audit_log_time_idx").on(t.createdAtM, t.id),
    index("audit_log_targets_idx").using("gin", sql`${t.targets} jsonb_path_ops`),
  ],
);

/**
 * Webhook endpoints (issue 38 §3, docs/webhooks.md): where a workspace's events are POSTed, signed per Standard
 * Webhooks. `events`: the event types it is sent (the audit catalogue's names). The signing secret is sealed with
 * AES-256-GCM under the workspace's data key (`encryption_key_id`, as encrypted_keys are; the endpoint's id and
 * workspace are its associated data); null once `keyhaven reset-encryption-key` forgot it, which disables the
 * endpoint. The outbox trigger (migration webhooks) finds a workspace's enabled endpoints by workspace_id.
 */
export const webhookEndpoints = pgTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    events: text("events").array().notNull(),
    description: text("description"),
    secretEncrypted: text("secret_encrypted"),
    encryptionKeyId: text("encryption_key_id").references(() => encryptionKeys.id),
    enabled: boolean("enabled").notNull().default(true),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
  },
  (t) => [index("webhook_endpoints_workspace_idx").on(t.workspaceId)],
);

/**
 * The webhook outbox: one row per message (`id`, `msg_…`, the `webhook-id` header) and endpoint, written in the
 * transaction of the change it reports (the audit log's outbox trigger, migration webhooks) and sent by the delivery
 * worker (core/webhooks). `status`: pending (due at `next_attempt_at_m`), delivered (a 2xx) or failed (retries spent).
 * `lease`: the claim of the worker sending it; a claimed row's `next_attempt_at_m` is when the lease ends, so a
 * worker killed mid-send leaves it due again then (at least once). A replay makes it pending and due again, with the
 * same id (receivers dedupe by it). `last_error`: a short reason, never a secret.
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id").notNull(),
    endpointId: text("endpoint_id")
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: "cascade" }),
    event: text("event").notNull(),
    payload: jsonb("payload").$type<Record<string, unknown>>().notNull(),
    status: text("status").notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    /** The attempt count when the retry schedule last started (0; a replay restarts it). */
    scheduleFrom: integer("schedule_from").notNull().default(0),
    nextAttemptAtM: ms("next_attempt_at_m").notNull(),
    lease: text("lease"),
    lastStatus: integer("last_status"),
    lastError: text("last_error"),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m").notNull(),
  },
  (t) => [
    index("webhook_deliveries_due_idx").on(t.nextAttemptAtM).where(sql`${t.status} = 'pending'`),
    index("webhook_deliveries_endpoint_idx").on(t.endpointId, t.createdAtM, t.id),
    index("webhook_deliveries_finished_idx").on(t.updatedAtM).where(sql`${t.status} <> 'pending'`),
  ],
);

/** Each attempt to send a webhook delivery: when, the response's status (null: none) and a short error. */
export const webhookAttempts = pgTable(
  "webhook_attempts",
  {
    deliveryId: text("delivery_id")
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    atM: ms("at_m").notNull(),
    status: integer("status"),
    error: text("error"),
    durationMs: integer("duration_ms").notNull(),
  },
  (t) => [primaryKey({ columns: [t.deliveryId, t.attempt] })],
);

/**
 * The stored answers of requests made with an Idempotency-Key (issue 35 §3), one per caller (`scope`: a workspace and
 * its actor, or the operator) and key (`key_hash`: sha256 of the header's value, never the value). `fingerprint`:
 * sha256 of the method, path and raw body, so a different request under the same key is told apart. `answer`: the
 * answer (status, content type, body) sealed with AES-256-GCM under a key derived from the Idempotency-Key itself, so
 * the table alone never yields one (createKey's answer holds a plaintext key, createRootKey's a root key).
 */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    scope: text("scope").notNull(),
    keyHash: text("key_hash").notNull(),
    fingerprint: text("fingerprint").notNull(),
    status: integer("status").notNull(),
    answer: text("answer").notNull(),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [primaryKey({ columns: [t.scope, t.keyHash] }), index("idempotency_keys_time_idx").on(t.createdAtM)],
);

/**
 * The web console's sessions (issue 37): one per sign-in. `id_hash`: sha256 of the cookie's 32 random bytes, never
 * the bytes. `kind`: "root_key" (the console acts as that root key, re-authenticated by its hash on every request,
 * so revoking or narrowing it takes effect at once) or "operator" (the admin token; `operator_check` is an HMAC of
 * the token under the session's own secret, so a changed token ends such sessions and the table alone yields
 * nothing to guess it from). A session ends `idle` after its last use or at `expires_at_m`, whichever comes first;
 * signing out deletes it.
 */
export const consoleSessions = pgTable(
  "console_sessions",
  {
    idHash: text("id_hash").primaryKey(),
    kind: text("kind").notNull(),
    workspaceId: text("workspace_id"),
    rootKeyId: text("root_key_id"),
    rootKeyHash: text("root_key_hash"),
    operatorCheck: text("operator_check"),
    createdAtM: ms("created_at_m").notNull(),
    lastSeenAtM: ms("last_seen_at_m").notNull(),
    expiresAtM: ms("expires_at_m").notNull(),
  },
  (t) => [index("console_sessions_expires_idx").on(t.expiresAtM)],
);

/**
 * The thresholds of a key's alerts (docs/webhooks.md, threshold events), set for an API (`target_id` its id) or a key
 * (its id; `key_id` set), the key's overriding its API's, its API's the defaults: key.credits.low when the remaining uses
 * fall below `credits_low_remaining`, or below `credits_low_percent` % of the refill amount (else of the starting
 * credits) — each null: inherited; a percent of 0: never —, and key.expiring `expiring_within_ms` before the expiry.
 */
export const alertThresholds = pgTable(
  "alert_thresholds",
  {
    targetId: text("target_id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    apiId: text("api_id")
      .notNull()
      .references(() => apis.id, { onDelete: "cascade" }),
    keyId: text("key_id").references(() => keys.id, { onDelete: "cascade" }),
    creditsLowPercent: smallint("credits_low_percent"),
    creditsLowRemaining: integer("credits_low_remaining"),
    expiringWithinMs: ms("expiring_within_ms"),
    updatedAtM: ms("updated_at_m").notNull(),
  },
  (t) => [index("alert_thresholds_workspace_idx").on(t.workspaceId)],
);

/**
 * The threshold alerts a key is in (docs/webhooks.md): a row per key and `kind` (credits.low, credits.exhausted,
 * expiring, expired, ratelimited) while it holds, so that each crossing sends one event and its lifting one `.resolved`
 * event. Written only while the key's workspace has an endpoint subscribed to a threshold event, by the same statement as
 * the change that crosses (the keys_alerts trigger), by the expiry scan, or by the first refusal of a rate limit's
 * window (`until_m`: the window's end).
 */
export const keyAlerts = pgTable(
  "key_alerts",
  {
    keyId: text("key_id")
      .notNull()
      .references(() => keys.id, { onDelete: "cascade" }),
    kind: text("kind").notNull(),
    workspaceId: text("workspace_id").notNull(),
    sinceM: ms("since_m").notNull(),
    untilM: ms("until_m"),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.kind] }), index("key_alerts_kind_idx").on(t.kind, t.untilM)],
);

/**
 * A customer portal (issue 39): the page where a team's own customers see and reroll their keys and read their usage,
 * over one API (its keyspace; upstream's `key_auth_id`, unique as there: one portal per API). `slug`: 3–64 lowercase
 * letters, digits and single hyphens, unique in the workspace; createSession names a portal by id or slug. `enabled`:
 * a disabled portal mints no session and its sessions stop working. Branding (title, accent colour, logo) and the
 * default return link are shown on the portal page; none is a secret.
 */
export const portals = pgTable(
  "portals",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    apiId: text("api_id")
      .notNull()
      .references(() => apis.id, { onDelete: "cascade" }),
    slug: text("slug").notNull(),
    name: text("name").notNull(),
    returnUrl: text("return_url"),
    brandingTitle: text("branding_title"),
    accentColor: text("accent_color"),
    logoUrl: text("logo_url"),
    enabled: boolean("enabled").notNull().default(true),
    createdAtM: ms("created_at_m").notNull(),
    updatedAtM: ms("updated_at_m"),
  },
  (t) => [uniqueIndex("portals_workspace_slug_idx").on(t.workspaceId, t.slug), uniqueIndex("portals_api_idx").on(t.apiId)],
);

/**
 * A portal session (upstream's `portal_sessions`): minted by a root key (createSession) for one end user
 * (`external_id`) with the scopes granted, over the portal's API. Only hashes are kept (sha256, base64, as keys'):
 * of the exchange code (`pst_…`, single use, 15 minutes) and of the access token it is exchanged for (`pat_…`,
 * 24 hours). It ends when its token expires, when `revoked_at_m` is set (sign-out; the end user's identity deleted),
 * when the root key that minted it is deleted (cascade), and when the portal is deleted (cascade) or disabled.
 */
export const portalSessions = pgTable(
  "portal_sessions",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id").notNull(),
    portalId: text("portal_id")
      .notNull()
      .references(() => portals.id, { onDelete: "cascade" }),
    externalId: text("external_id").notNull(),
    scopes: text("scopes").array().notNull(),
    /** The APIs (keyspaces) the session may see: the portal's, at mint time. */
    apiIds: text("api_ids").array().notNull(),
    preview: boolean("preview").notNull().default(false),
    returnUrl: text("return_url"),
    mintedBy: text("minted_by")
      .notNull()
      .references(() => rootKeys.id, { onDelete: "cascade" }),
    codeHash: text("code_hash").notNull(),
    codeExpiresAtM: ms("code_expires_at_m").notNull(),
    tokenHash: text("token_hash"),
    tokenCreatedAtM: ms("token_created_at_m"),
    tokenExpiresAtM: ms("token_expires_at_m"),
    revokedAtM: ms("revoked_at_m"),
    /** Keys rerolled through this session: at most MAX_REROLLS_PER_SESSION (core/portals/portals.access.ts). */
    rerolls: integer("rerolls").notNull().default(0),
    createdAtM: ms("created_at_m").notNull(),
  },
  (t) => [
    uniqueIndex("portal_sessions_code_hash_idx").on(t.codeHash),
    uniqueIndex("portal_sessions_token_hash_idx").on(t.tokenHash),
    index("portal_sessions_portal_idx").on(t.portalId),
    index("portal_sessions_minted_by_idx").on(t.mintedBy),
    index("portal_sessions_external_id_idx").on(t.workspaceId, t.externalId),
  ],
);
