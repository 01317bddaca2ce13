import { z } from "zod";
import { createKeyMigration } from "../../../core/import/import.migrate.js";
import { KEY_MIGRATION_ALGORITHMS } from "../../../storage/schema.js";
import { defineV2Rpc } from "../rpc.js";

export const createMigration = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.createMigration",
  auth: "rootKey",
  summary:
    "keyhaven extension: creates a migration for keys.migrateKeys with the algorithm its keys' hashes were made with (upstream's support creates these). keys.migrateKeys creates an unknown migrationId itself, with `sha256`.",
  errors: [400, 401, 403, 409, 503],
  returns: "The migration.",
  input: z
    .object({
      migrationId: z
        .string()
        .min(3)
        .max(255)
        .describe("The migration's id, of your choosing; unique in your workspace (not across workspaces)."),
      algorithm: z.enum(KEY_MIGRATION_ALGORITHMS).describe("How the keys' hashes were made (contract §6.3)."),
    })
    .strict(),
  output: z.object({ migrationId: z.string(), algorithm: z.enum(KEY_MIGRATION_ALGORITHMS) }),
  handler: async (input, { deps, caller }) => {
    const migration = await createKeyMigration(deps, caller, input, deps.clock.now());
    return { data: { migrationId: migration.id, algorithm: migration.algorithm } };
  },
});
