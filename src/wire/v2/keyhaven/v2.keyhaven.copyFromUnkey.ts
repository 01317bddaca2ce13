import { z } from "zod";
import { copyFromUnkey as copyFromUnkeyCore, MAX_COPY_ITEMS } from "../../../core/import/import.fromUnkey.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { externalIdInput, metaInput, ratelimitsInput } from "../identities/identities.schemas.js";
import { v2Id } from "../inputBounds.js";
import { slugInput } from "../permissions/permissions.schemas.js";
import { identifierInput, limitInput, namespaceInput, overrideDurationInput } from "../ratelimit/ratelimit.schemas.js";
import { BULK_BODY_LIMIT, defineV2Rpc } from "../rpc.js";
import { expiresInput, keyPermissionsInput, keyRolesInput, V2_MAX_EXPIRES } from "../keys/keys.schemas.js";

/**
 * The body of one copy request: the import routes' 1 MiB. 1,000 keys with a few roles, limits and a small meta each
 * are about 1 MB of JSON, so `keyhaven import --from-unkey` splits a batch by bytes too (fromUnkey.copy.ts). The
 * parsing of a hostile body grows with it: test/hostile-bodies.test.ts measured the worst 1 MiB body at about 20 ms
 * of the event loop once every section was bounded by itself (below), 8.7 s for an 8 MiB body before.
 */
export const COPY_BODY_LIMIT = BULK_BODY_LIMIT;

const copyApi = z.object({ id: v2Id.describe("The API's id in hosted Unkey, kept."), name: z.string().min(3).max(256) }).strict();

const copyPermission = z
  .object({
    id: v2Id.describe("The permission's id in hosted Unkey, kept."),
    name: z.string().min(1).max(512),
    slug: slugInput,
    description: z.string().max(512).optional(),
  })
  .strict();

const copyRole = z
  .object({
    id: v2Id.describe("The role's id in hosted Unkey, kept."),
    name: z.string().min(1).max(128),
    description: z.string().max(512).optional(),
    permissions: z
      .array(slugInput)
      .max(1000)
      .optional()
      .describe("Slugs of the role's permissions (they replace what it has); absent: none."),
  })
  .strict();

const copyIdentity = z
  .object({
    id: v2Id.describe("The identity's id in hosted Unkey, kept."),
    externalId: externalIdInput,
    meta: metaInput.optional(),
    ratelimits: ratelimitsInput.optional().describe("The identity's rate limits (they replace what it has)."),
  })
  .strict();

const copyCredits = z
  .object({
    remaining: z.int().min(0).max(MAX_INT32).nullable().describe("Uses left; null: unlimited."),
    refill: z
      .object({
        interval: z.enum(["daily", "monthly"]),
        amount: z.int().min(1).max(MAX_INT32).describe("What `remaining` is set to at each refill."),
        refillDay: z.int().min(1).max(31).optional().describe("The day of a monthly refill (default 1; ignored for daily)."),
      })
      .strict()
      .optional(),
  })
  .strict();

const copyKey = z
  .object({
    id: v2Id.describe("The key's id in hosted Unkey, kept."),
    apiId: v2Id.describe("Its API: one of the workspace, or of this request."),
    start: z.string().max(255).describe("The key's first characters as hosted Unkey shows them."),
    createdAt: z.int().min(0).max(V2_MAX_EXPIRES).describe("When it was created, unix milliseconds."),
    name: z.string().min(1).max(255).optional(),
    meta: metaInput.optional(),
    expires: expiresInput.optional(),
    enabled: z.boolean(),
    credits: copyCredits.optional(),
    ratelimits: ratelimitsInput.optional().describe("The key's own rate limits (they replace what it has)."),
    roles: keyRolesInput.optional().describe("Names of the key's roles (they replace what it has); each must exist."),
    permissions: keyPermissionsInput
      .optional()
      .describe("Slugs of the key's direct permissions (they replace what it has); each must exist."),
    identityId: v2Id.optional().describe("An identity of the workspace, or of this request."),
    plaintext: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .describe("The key itself, when hosted Unkey returned it: keyhaven stores its hash (and verifies it at once)."),
    recoverable: z.boolean().optional().describe("With `plaintext` only: also keep the key encrypted, for keys.getKey's `decrypt`."),
  })
  .strict()
  .superRefine((key, ctx) => {
    if (key.recoverable === true && key.plaintext === undefined) {
      ctx.addIssue({ code: "custom", path: ["recoverable"], message: "recoverable needs plaintext" });
    }
  });

const copyOverride = z
  .object({
    namespace: namespaceInput.describe("The namespace's name; created when the workspace has none of that name."),
    identifier: identifierInput,
    limit: limitInput(0),
    duration: overrideDurationInput,
  })
  .strict();

const SECTIONS = ["apis", "permissions", "roles", "identities", "keys", "overrides"] as const;

const counts = z.object({
  created: z.number(),
  updated: z.number(),
  unchanged: z.number(),
  skipped: z
    .array(z.object({ id: z.string(), reason: z.string().describe("Why, naming fields and ids (never a value).") }))
    .describe("Items left as they were, with why."),
});

export const copyFromUnkey = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.copyFromUnkey",
  auth: "rootKey",
  bodyLimit: COPY_BODY_LIMIT,
  namedPaths: true,
  summary:
    "keyhaven extension, for `keyhaven import --from-unkey`: upserts records of a hosted Unkey workspace by the ids they had there (apis, permissions, roles, identities, keys, overrides, in that order) in one transaction. A key without `plaintext` is created pending: it cannot verify until adopted. An item that cannot be held is skipped with a reason; a malformed body writes nothing. Idempotent.",
  errors: [400, 401, 403, 409, 412, 503],
  returns: "Per section, how many records were created, updated, unchanged, and which were skipped with why.",
  // Each section bounded by itself too: zod refuses a longer array before reading its items, whereas without the
  // bound 250,000 malformed items of a 1 MiB body were each an issue (2.4 s of the event loop, hostile-bodies.test.ts).
  input: z
    .object({
      apis: z.array(copyApi).max(MAX_COPY_ITEMS).optional(),
      permissions: z.array(copyPermission).max(MAX_COPY_ITEMS).optional(),
      roles: z.array(copyRole).max(MAX_COPY_ITEMS).optional(),
      identities: z.array(copyIdentity).max(MAX_COPY_ITEMS).optional(),
      keys: z.array(copyKey).max(MAX_COPY_ITEMS).optional(),
      overrides: z.array(copyOverride).max(MAX_COPY_ITEMS).optional(),
    })
    .strict()
    .superRefine((body, ctx) => {
      const total = SECTIONS.reduce((n, section) => n + (body[section]?.length ?? 0), 0);
      if (total > MAX_COPY_ITEMS) {
        ctx.addIssue({ code: "custom", path: [], message: `at most ${MAX_COPY_ITEMS} items in all per request, got ${total}` });
        return;
      }
      for (const section of SECTIONS) {
        if (section === "overrides") continue;
        const seen = new Map<string, number>();
        (body[section] ?? []).forEach((item, index) => {
          const first = seen.get(item.id);
          if (first !== undefined) {
            ctx.addIssue({ code: "custom", path: [section, index, "id"], message: `repeats ${section}[${first}].id` });
          } else seen.set(item.id, index);
        });
      }
    }),
  output: z.object({
    apis: counts,
    permissions: counts,
    roles: counts,
    identities: counts,
    overrides: counts,
    keys: counts.extend({
      verifiable: z.number().describe("Of the keys of this request, how many can verify now."),
      pending: z.number().describe("Of the keys of this request, how many wait for adoption (no hash yet)."),
    }),
  }),
  handler: async (input, { deps, caller }) => ({ data: await copyFromUnkeyCore(deps, caller, input) }),
});
