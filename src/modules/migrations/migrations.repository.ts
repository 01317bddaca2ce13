import { sql } from "drizzle-orm";
import type { Db } from "../../db/client.js";
import { insertRecordset } from "../../db/bulk.js";
import { encryptionKeys } from "../../db/schema.js";
import { ApiError } from "../../errors.js";
import type { ImportPlan } from "./import.plan.js";

const KEY_COLUMNS = {
  id: "text",
  workspace_id: "text",
  api_id: "text",
  hash: "text",
  start: "text",
  prefix: "text",
  name: "text",
  owner_id: "text",
  identity_id: "text",
  meta: "jsonb",
  expires: "timestamptz",
  remaining_requests: "integer",
  refill_day: "smallint",
  refill_amount: "integer",
  enabled: "boolean",
  environment: "text",
  created_at_m: "bigint",
};

/**
 * The second phase of an import: one transaction that only inserts. A key whose hash already exists (in any
 * workspace, or committed meanwhile by a concurrent import) is skipped by ON CONFLICT, detected by its missing id,
 * and turned into a CONFLICT that rolls everything back. Returns the key ids in request order.
 */
export async function insertImport(db: Db, plan: ImportPlan): Promise<string[]> {
  await db.transaction(async (tx) => {
    if (plan.dataKey?.newRow) await tx.insert(encryptionKeys).values(plan.dataKey.newRow);

    if (plan.identities.size > 0) {
      const now = Date.now();
      // DO UPDATE (a no-op) rather than DO NOTHING so that existing identities are returned too, in one statement.
      const identities = await insertRecordset<object, { id: string; external_id: string }>(
        tx,
        "identities",
        { id: "text", workspace_id: "text", external_id: "text", environment: "text", created_at_m: "bigint" },
        [...plan.identities].map(([externalId, id]) => ({
          id,
          workspace_id: plan.workspaceId,
          external_id: externalId,
          environment: "default",
          created_at_m: now,
        })),
        sql`on conflict (workspace_id, external_id) do update set external_id = excluded.external_id
            returning id, external_id`,
      );
      const idByExternalId = new Map(identities.map((r) => [r.external_id, r.id]));
      plan.keys.forEach((row, i) => {
        const externalId = plan.externalIds[i];
        if (externalId !== undefined) row.identity_id = idByExternalId.get(externalId) ?? null;
      });
    }

    const inserted = await insertRecordset<object, { id: string }>(
      tx,
      "keys",
      KEY_COLUMNS,
      plan.keys,
      sql`on conflict (hash) do nothing returning id`,
    );
    if (inserted.length !== plan.keys.length) {
      const ids = new Set(inserted.map((r) => r.id));
      const index = plan.keys.findIndex((k) => !ids.has(k.id));
      throw new ApiError("CONFLICT", `the key at index ${index} already exists; no key of this request was created`);
    }

    await insertRecordset(
      tx,
      "encrypted_keys",
      { key_id: "text", workspace_id: "text", encrypted: "text", encryption_key_id: "text", created_at_m: "bigint" },
      plan.encrypted,
    );
    await insertRecordset(
      tx,
      "keys_roles",
      { key_id: "text", role_id: "text", workspace_id: "text", created_at_m: "bigint" },
      plan.keyRoles,
    );
    await insertRecordset(
      tx,
      "keys_permissions",
      { key_id: "text", permission_id: "text", workspace_id: "text", created_at_m: "bigint" },
      plan.keyPermissions,
    );
    await insertRecordset(
      tx,
      "ratelimits",
      {
        id: "text",
        workspace_id: "text",
        name: "text",
        key_id: "text",
        limit: "integer",
        duration: "bigint",
        auto_apply: "boolean",
        created_at_m: "bigint",
      },
      plan.ratelimits,
    );
  });
  return plan.keys.map((k) => k.id);
}
