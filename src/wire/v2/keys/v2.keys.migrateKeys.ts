import { z } from "zod";
import { migrateKeys as migrateKeysCore } from "../../../core/import/import.migrate.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { externalIdInput, metaInput, ratelimitsInput } from "../identities/identities.schemas.js";
import { slugInput } from "../permissions/permissions.schemas.js";
import { BULK_BODY_LIMIT, defineV2Rpc } from "../rpc.js";

/** At most this many keys per request (upstream sets no bound; v1's import takes 100 as well). */
export const MAX_KEYS_PER_MIGRATION = 100;

const creditsInput = z
  .object({
    remaining: z.int().min(0).max(MAX_INT32).nullable().describe("Uses left; null: unlimited."),
    refill: z
      .object({
        interval: z.enum(["daily", "monthly"]),
        amount: z.int().min(1).max(MAX_INT32).describe("What `remaining` is set to at each refill."),
        refillDay: z.int().min(1).max(31).optional().describe("The day of the month of a monthly refill (required for monthly)."),
      })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((credits, ctx) => {
    // A monthly refill needs its day (v2 refuses the whole request; v1's import defaults it to 1).
    if (credits.refill?.interval === "monthly" && credits.refill.refillDay === undefined) {
      ctx.addIssue({ code: "custom", path: ["refill", "refillDay"], message: "refillDay is required when interval is monthly" });
    }
    if (credits.refill?.interval === "daily" && credits.refill.refillDay !== undefined) {
      ctx.addIssue({ code: "custom", path: ["refill", "refillDay"], message: "refillDay must be absent when interval is daily" });
    }
  });

const migrateKeyInput = z
  .object({
    hash: z
      .string()
      .min(3)
      .max(512)
      .describe(
        "The key's hash as the migration's algorithm makes it: base64 SHA-256 of the key (`sha256`), or hex SHA-256 of its long token (`github.com/seamapi/prefixed-api-key`).",
      ),
    name: z.string().min(1).max(255).optional(),
    externalId: externalIdInput.optional().describe("Links the workspace's identity with this id, created if needed."),
    meta: metaInput.optional(),
    roles: z.array(z.string().min(1).max(128)).max(100).optional().describe("Role names; missing roles are created."),
    permissions: z.array(slugInput).max(1000).optional().describe("Permission slugs; missing permissions are created."),
    expires: z.int().min(0).max(4_102_444_800_000).optional().describe("When the key expires, unix ms."),
    enabled: z.boolean().optional().describe("Default true."),
    credits: creditsInput.optional(),
    ratelimits: ratelimitsInput.optional().describe("The key's own rate limits."),
  })
  .strict();

export const migrateKeys = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.migrateKeys",
  auth: "rootKey",
  bodyLimit: BULK_BODY_LIMIT,
  summary:
    "Imports keys by their hash into an API, in one transaction. A hash that exists already (in any workspace) is reported in `failed`; any other refusal writes nothing. A `migrationId` the workspace has not used yet is created for it with `sha256` (ids are per workspace; see keyhaven.createMigration).",
  errors: [400, 401, 403, 404, 503],
  returns: "The migrated keys (`hash`, `keyId`, in request order) and the hashes that existed already.",
  input: z
    .object({
      migrationId: z.string().min(3).max(255).describe("The migration the keys belong to (key_migrations)."),
      apiId: z.string().min(3).max(255).describe("The API the keys are imported into."),
      keys: z.array(migrateKeyInput).min(1).max(MAX_KEYS_PER_MIGRATION),
    })
    .strict(),
  output: z.object({
    migrated: z.array(z.object({ hash: z.string(), keyId: z.string() })).describe("The keys created, in request order."),
    failed: z.array(z.string()).describe("Hashes that a key already had: not migrated (empty when none)."),
  }),
  handler: async (input, { deps, caller }) => ({ data: await migrateKeysCore(deps, caller, input, deps.clock.now()) }),
});
