import { z } from "zod";
import { hasPermission, type RootKeyAuth } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { listMigrationErrors, listRetryingBatches, summarizeMigration } from "./migrations.repository.js";

/** At most this many errors are listed; `keys.failed` counts them all. */
export const MAX_LISTED_ERRORS = 1000;
/** At most this many batches waiting to be tried again are listed; `batches.pending` counts them all. */
export const MAX_LISTED_RETRYING = 100;

export const getMigration = defineRpc({
  method: "GET",
  path: "/v1/migrations.getMigration",
  auth: "rootKey",
  summary:
    "keyhaven extension: the progress of the batches enqueued with migrations.enqueueKeys under a migrationId: pending batches whose last attempt failed transiently (retried with backoff), and why keys were not imported (never the key itself).",
  errors: [400, 403, 404, 503],
  returns: "The migration's counts per batch and key, its batches waiting to be retried, and its errors.",
  input: z.object({ migrationId: queryText.min(1).max(256).describe("The `migrationId` the batches were enqueued under.") }),
  output: z.object({
    migrationId: z.string(),
    batches: z
      .object({ pending: z.number(), done: z.number(), failed: z.number() })
      .describe("Batches waiting to be imported, imported with every key, and with at least one key not imported."),
    keys: z
      .object({ enqueued: z.number(), imported: z.number(), failed: z.number() })
      .describe("Keys enqueued, imported, and not imported."),
    retrying: z
      .array(
        z.object({
          batchId: z.number(),
          enqueuedAt: z.number(),
          attempts: z.number(),
          lastError: z.string().nullable(),
          nextAttemptAt: z.number().nullable(),
        }),
      )
      .describe(
        "Pending batches whose last attempt failed transiently (at most 100): the SQLSTATE of that failure (`lastError`) and when they are tried next (unix ms).",
      ),
    errors: z
      .array(
        z.object({
          batchId: z.number(),
          enqueuedAt: z.number(),
          index: z.number().nullable(),
          code: z.string(),
          message: z.string(),
        }),
      )
      .describe(
        "Why keys were not imported (at most 1000): `index` is the key's position in its batch, null for the whole batch. Never a key or its hash.",
      ),
  }),
  handler: async ({ migrationId }, { deps, rootKey: auth }) => {
    const { db } = deps;
    // Decided before the lookup where the root key's permissions alone decide, and never naming the migration's
    // APIs: a key without read_api on all of them must not learn which they are.
    const everyApi = hasPermission(auth, { or: ["*", "api.*.read_api"] });
    const someApi = everyApi || [...auth.permissions].some((p) => /^api\.[^.]+\.read_api$/.test(p));
    if (!someApi) throw insufficientToRead(auth);
    const summary = await summarizeMigration(db, auth.workspaceId, migrationId);
    if (!summary) throw new ApiError("NOT_FOUND", `migration ${migrationId} not found`);
    if (!everyApi && !summary.apiIds.every((id) => auth.permissions.has(`api.${id}.read_api`))) {
      throw insufficientToRead(auth);
    }
    const retrying = await listRetryingBatches(db, auth.workspaceId, migrationId, MAX_LISTED_RETRYING);
    const errors = await listMigrationErrors(db, auth.workspaceId, migrationId, MAX_LISTED_ERRORS);
    return { migrationId, batches: summary.batches, keys: summary.keys, retrying, errors };
  },
});

function insufficientToRead(auth: RootKeyAuth): ApiError {
  const held = [...auth.permissions].map((p) => JSON.stringify(p)).join(", ");
  return new ApiError(
    "INSUFFICIENT_PERMISSIONS",
    `Missing permissions: need one of ["*", "api.*.read_api"], or "api.<apiId>.read_api" for every API of the migration, have [${held}]`,
  );
}
