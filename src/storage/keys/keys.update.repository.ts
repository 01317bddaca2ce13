import { and, eq, getTableColumns, isNull, type SQL, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import type { Db } from "../client.js";
import { direct } from "../directPrepared.js";
import { apis, auditLog, keys } from "../schema.js";
import { guardParams, rootKeyStillGrantsPrepared, type WriteGuard } from "../rootKeys/rootKeys.auth.repository.js";
import { effectiveRemaining } from "./keys.refill.js";

/** The columns of an audit row, each a prepared parameter `audit_<field>` of the one-statement writes. */
const auditColumns = Object.entries(getTableColumns(auditLog));
const auditColumnList = sql.raw(auditColumns.map(([, column]) => `"${column.name}"`).join(", "));

/**
 * A data-modifying CTE's body that writes one audit row, given as the prepared parameters auditParams fills, when
 * the CTE `done` returned a row: the change and its entry are one statement, so they commit together or not at all,
 * and a statement that changed nothing records nothing (core/changes.ts, WriteGate.statement). With `apiTarget`,
 * `done` returns the key's `api_id` and the entry also targets that API (a statement that finds the key by id learns
 * its API only as it writes). One parameter per column, not the row as JSON: PostgreSQL's json_to_recordset cost
 * half of what the entry added to the statement (docs/benchmarks.md, issue 35 §4).
 */
export function insertAuditRowIf(done: SQL, apiTarget?: "apiTarget"): SQL {
  const values = sql.join(
    auditColumns.map(([field, column]) => {
      const value = sql`${sql.placeholder(`audit_${field}`)}::${sql.raw(column.getSQLType())}`;
      return field === "targets" && apiTarget
        ? sql`${value} || jsonb_build_array(jsonb_build_object('type', 'api', 'id', d.api_id))`
        : value;
    }),
    sql`, `,
  );
  const from = apiTarget ? sql`from (select api_id from ${done} limit 1) as d` : sql`where exists (select 1 from ${done})`;
  return sql`insert into ${auditLog} (${auditColumnList}) select ${values} ${from}`;
}

/** Each audit column's parameter name and encoder, made once (mapToDriverValue: jsonb as JSON text, ms as text). */
const auditEncoders = auditColumns.map(([field, column]) => ({
  field,
  param: `audit_${field}`,
  encode: (value: unknown) => column.mapToDriverValue(value as never) as unknown,
}));

/** The prepared parameters insertAuditRowIf reads, of the one audit row of a one-statement write. */
export function auditParams(rows: readonly Record<string, unknown>[]): Record<string, unknown> {
  if (rows.length !== 1) throw new Error(`a one-statement write records exactly one audit row, not ${rows.length}`);
  const row = rows[0]!;
  const params: Record<string, unknown> = {};
  for (const { field, param, encode } of auditEncoders) {
    const value = row[field];
    params[param] = value === undefined || value === null ? null : encode(value);
  }
  return params;
}

// keys.updateKey: the key's own columns. Its identity, default rate limit, roles and permissions are written by
// the repositories of those (identities.repository.ts, keys.ratelimit.repository.ts, keys.rbac.repository.ts).

/**
 * The key to update, locked until the transaction ends; undefined when it does not exist, is deleted, belongs to
 * another workspace or to a deleted API (all answered alike).
 */
export async function lockKeyForUpdate(db: Db, workspaceId: string, keyId: string) {
  const [row] = await db
    .select({
      id: keys.id,
      apiId: keys.apiId,
      workspaceId: keys.workspaceId,
      remaining: keys.remaining,
      refillAmount: keys.refillAmount,
    })
    .from(keys)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .where(and(eq(keys.id, keyId), eq(keys.workspaceId, workspaceId), isNull(keys.deletedAtM)))
    .limit(1)
    .for("update", { of: keys });
  return row;
}

export type KeyChanges = {
  name?: string | null;
  ownerId?: string | null;
  identityId?: string | null;
  meta?: Record<string, unknown> | null;
  expires?: Date | null;
  /** null: unlimited. */
  remaining?: number | null;
  /** null clears the refill; `day` null is a daily refill. */
  refill?: { amount: number; day: number | null } | null;
  enabled?: boolean;
  environment?: string | null;
};

/**
 * Writes the given columns of a key locked by lockKeyForUpdate, keeping lazy refills right: a refill that fell due
 * before this write is never applied on top of a `remaining` set here, and one that is due when the refill settings
 * change is applied first (reads already report it), at the old settings.
 */
export async function updateKeyColumns(
  db: Db,
  key: { id: string; refillAmount: number | null },
  changes: KeyChanges,
  now: number,
): Promise<void> {
  const { refill, remaining, ...plain } = changes;
  const set: PgUpdateSetSource<typeof keys> = Object.assign({}, plain, { updatedAtM: now });
  if (refill === null) Object.assign(set, { refillAmount: null, refillDay: null, lastRefillAt: null });
  if (refill) Object.assign(set, { refillAmount: refill.amount, refillDay: refill.day, lastRefillAt: sql`now()` });
  if (remaining !== undefined) {
    set.remaining = remaining;
    if (refill === undefined && key.refillAmount !== null) set.lastRefillAt = sql`now()`;
  } else if (refill !== undefined) {
    set.remaining = effectiveRemaining;
  }
  await db.update(keys).set(set).where(eq(keys.id, key.id));
}

/** Which columns a common update writes, and whether it names the APIs it may touch: one prepared statement each. */
type UpdateShape = { fields: string[]; withRemaining: boolean; apiList: boolean };

/**
 * keys.updateKey's common case, as prepared statements (one per set of columns written, at most a few hundred, made
 * on first use): building the statement with drizzle and planning it cost more CPU than the rest of the route.
 * One per database handle (services.ts, through prepareKeyWrites).
 */
export function prepareLiveKeyUpdates(db: Db) {
  const statements = new Map<string, ReturnType<typeof prepareShape>>();
  const prepareShape = ({ fields, withRemaining, apiList }: UpdateShape, name: string) => {
    // Each value a plain parameter, encoded by the caller (drizzle's encoding would turn a null into JSON null).
    const set: PgUpdateSetSource<typeof keys> = { updatedAtM: sql`${sql.placeholder("updatedAtM")}` };
    for (const field of fields) (set as Record<string, unknown>)[field] = sql`${sql.placeholder(field)}`;
    if (withRemaining) {
      set.remaining = sql`${sql.placeholder("remaining")}`;
      set.lastRefillAt = sql`case when ${keys.refillAmount} is not null then now() else ${keys.lastRefillAt} end`;
    }
    const update = db
      .update(keys)
      .set(set)
      .from(apis)
      .where(
        and(
          eq(keys.id, sql.placeholder("keyId")),
          eq(keys.workspaceId, sql.placeholder("workspaceId")),
          isNull(keys.deletedAtM),
          eq(apis.id, keys.apiId),
          isNull(apis.deletedAtM),
          apiList ? sql`${keys.apiId} = any(${sql.placeholder("apiIds")}::text[])` : undefined,
          rootKeyStillGrantsPrepared,
        ),
      )
      .returning({ id: keys.id, apiId: keys.apiId });
    // The columns and the key.update entry in one statement (data-modifying CTEs): they commit together, and a
    // statement that updated nothing records nothing.
    const updated = db.$with("updated", { id: keys.id, apiId: keys.apiId }).as(update.getSQL());
    const audited = db.$with("audited", {}).as(insertAuditRowIf(sql`updated`, "apiTarget"));
    return direct(db, db.with(updated, audited).select({ id: updated.id }).from(updated).prepare(name));
  };
  return {
    /**
     * Writes `changes` (no refill settings) to the live key `keyId` of `workspaceId` in a live API, when that API is
     * one of `apiIds` ("any": every API), and its audit rows (`audit`, each also targeting the key's API), in one
     * statement with no transaction. A `remaining` set here restarts a
     * refilled key's period, as updateKeyColumns does. False when no such key was updated (gone, another
     * workspace's, a deleted API, an API not in `apiIds`, a `guard` whose root key no longer grants what it did,
     * rootKeyStillGrants): the caller then takes the transaction, which says why.
     */
    async updateLiveKeyColumns(
      target: { workspaceId: string; keyId: string; apiIds: readonly string[] | "any" },
      changes: Omit<KeyChanges, "refill">,
      now: number,
      guard: WriteGuard | undefined,
      audit: readonly Record<string, unknown>[],
    ): Promise<boolean> {
      const { remaining, ...plain } = changes;
      const params: Record<string, unknown> = {
        keyId: target.keyId,
        workspaceId: target.workspaceId,
        updatedAtM: keys.updatedAtM.mapToDriverValue(now),
        ...guardParams(guard),
        ...auditParams(audit),
      };
      const fields: string[] = [];
      for (const [field, value] of Object.entries(plain)) {
        if (value === undefined) continue;
        const column = keys[field as keyof typeof plain];
        fields.push(field);
        // Each value encoded by its column (jsonb, dates), null as SQL NULL.
        params[field] = value === null ? null : column.mapToDriverValue(value as never);
      }
      fields.sort();
      const withRemaining = remaining !== undefined;
      if (withRemaining) params.remaining = remaining;
      const apiList = target.apiIds !== "any";
      if (apiList) params.apiIds = target.apiIds;
      const shape = `${fields.join(",")}|${withRemaining}|${apiList}`;
      let statement = statements.get(shape);
      if (!statement) {
        statement = prepareShape({ fields, withRemaining, apiList }, `keyhaven_update_key_${statements.size}`);
        statements.set(shape, statement);
      }
      const rows = await statement.execute(params);
      return rows.length > 0;
    },
  };
}

export type LiveKeyUpdates = ReturnType<typeof prepareLiveKeyUpdates>;
