import { z } from "zod";
import { readMigration } from "../../../core/import/import.status.js";
import { v1StoredError } from "../errors.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";

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
  handler: async ({ migrationId }, { deps, rootKey }) => {
    const migration = await readMigration(deps.db, rootKey, migrationId);
    return { ...migration, errors: migration.errors.map(({ refusal, ...row }) => ({ ...row, ...v1StoredError({ ...row, refusal }) })) };
  },
});
