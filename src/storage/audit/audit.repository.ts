import { and, asc, desc, eq, gte, inArray, isNull, lt, type SQL, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { deleteRowsBefore } from "../prune.js";
import { auditLog } from "../schema.js";

/** An audit entry as stored. */
export type AuditLogRow = typeof auditLog.$inferSelect;

/** Where a page of the audit log starts: strictly past this entry in (created_at_m, id) order, the page's way. */
export type AuditPosition = { readonly createdAtM: number; readonly id: string };

export type AuditLogFilter = {
  /** One workspace's entries; `null`: the entries above every workspace; undefined: every entry (the operator). */
  readonly workspaceId?: string | null | undefined;
  readonly events?: readonly string[] | undefined;
  readonly actorId?: string | undefined;
  /** Entries naming this id among their targets (the GIN index on targets answers `@>`). */
  readonly targetId?: string | undefined;
  /** Written at or after (unix ms). */
  readonly since?: number | undefined;
  /** Written before (unix ms, exclusive), so that consecutive ranges never share an entry. */
  readonly until?: number | undefined;
};

/** Newest first (the default) or oldest first, by (created_at_m, id). */
export type AuditOrder = "desc" | "asc";

/**
 * Up to `limit` entries matching `filter` in `order` by (created_at_m, id), past `after` when given: a keyset page,
 * so that entries written while a reader pages neither shift nor repeat what it reads next (oldest first, the core
 * keeps the page out of the last moments, whose entries may still be committing). One bounded statement on the
 * (workspace_id, created_at_m, id) or (created_at_m, id) index, read either way.
 */
export async function listAuditLogRows(
  db: Db,
  filter: AuditLogFilter,
  page: { readonly after?: AuditPosition | undefined; readonly limit: number; readonly order?: AuditOrder | undefined },
): Promise<AuditLogRow[]> {
  const where: (SQL | undefined)[] = [];
  if (filter.workspaceId === null) where.push(isNull(auditLog.workspaceId));
  else if (filter.workspaceId !== undefined) where.push(eq(auditLog.workspaceId, filter.workspaceId));
  if (filter.events !== undefined && filter.events.length > 0) where.push(inArray(auditLog.event, [...filter.events]));
  if (filter.actorId !== undefined) where.push(eq(auditLog.actorId, filter.actorId));
  if (filter.targetId !== undefined) where.push(sql`${auditLog.targets} @> ${JSON.stringify([{ id: filter.targetId }])}::jsonb`);
  if (filter.since !== undefined) where.push(gte(auditLog.createdAtM, filter.since));
  if (filter.until !== undefined) where.push(lt(auditLog.createdAtM, filter.until));
  const ascending = page.order === "asc";
  if (page.after !== undefined) {
    where.push(
      ascending
        ? sql`(${auditLog.createdAtM}, ${auditLog.id}) > (${page.after.createdAtM}, ${page.after.id})`
        : sql`(${auditLog.createdAtM}, ${auditLog.id}) < (${page.after.createdAtM}, ${page.after.id})`,
    );
  }
  const by = ascending ? asc : desc;
  return db
    .select()
    .from(auditLog)
    .where(and(...where))
    .orderBy(by(auditLog.createdAtM), by(auditLog.id))
    .limit(page.limit);
}

/**
 * Deletes up to `maxRows` entries written before `before` (unix ms, business time: the core passes it); returns how
 * many went. One short statement: the rows are chosen by their ctid in a bounded subselect, so no statement holds
 * locks on more than `maxRows` rows, whatever the backlog.
 */
export function deleteAuditLogRowsBefore(db: Db, before: number, maxRows: number): Promise<number> {
  return deleteRowsBefore(db, auditLog, auditLog.createdAtM, before, maxRows);
}
