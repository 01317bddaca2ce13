import { PermissionDeniedError } from "../../errors.js";
import type { Db } from "../../storage/client.js";
import type { Clock } from "../../clock.js";
import { type AuditLogRow, type AuditOrder, type AuditPosition, listAuditLogRows } from "../../storage/audit/audit.repository.js";
import type { AuditTarget } from "../../storage/schema.js";
import type { PermissionQuery } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import { requirePermission } from "../principal.js";
import { AUDIT_SETTLE_MS, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE } from "./audit.limits.js";

/** The permission that lets a root key read its workspace's audit log (besides `*`). */
export const READ_AUDIT_LOGS = "audit.*.read_logs";
const READ_AUDIT_LOGS_QUERY: PermissionQuery = { or: ["*", READ_AUDIT_LOGS] };

export { AUDIT_SETTLE_MS, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE };

/**
 * Who reads the audit log: a caller of one workspace (a root key: it needs `audit.*.read_logs` or `*`, and sees its
 * workspace's entries alone), or the operator (the admin token: every entry, or one workspace's when it names one).
 */
export type AuditReader = { readonly caller: Caller } | { readonly operator: true };

export type AuditLogQuery = {
  /** The operator's filter; a root key may name only its own workspace. */
  readonly workspaceId?: string | undefined;
  readonly events?: readonly string[] | undefined;
  readonly actorId?: string | undefined;
  readonly targetId?: string | undefined;
  /** Unix ms, inclusive. */
  readonly since?: number | undefined;
  /** Unix ms, exclusive. */
  readonly until?: number | undefined;
  readonly limit?: number | undefined;
  /** The cursor of the previous page (decodeAuditCursor accepts it). */
  readonly cursor?: string | undefined;
  /** Newest first (default) or oldest first (an export a SIEM appends in time order). */
  readonly order?: AuditOrder | undefined;
};

/** An audit entry as readers get it (the route's and the export's shape; docs/audit.md). */
export type AuditEntry = {
  id: string;
  time: number;
  event: string;
  workspaceId: string | null;
  actor: { type: string; id: string; name: string };
  targets: AuditTarget[];
  description: string;
  details?: Record<string, unknown>;
  context: { surface: string; requestId?: string; location?: string; userAgent?: string };
};

export type AuditPage = { entries: AuditEntry[]; cursor?: string; hasMore: boolean };

/**
 * A page of the audit log, newest first (or oldest first with `order: "asc"`). The cursor names the last entry of the
 * page (its time and id), and the next page starts strictly past it: newest first, an entry written meanwhile is
 * newer than the reader's first page, so it shifts nothing; oldest first, the page stops AUDIT_SETTLE_MS before now,
 * below any entry still committing. Either way no entry is skipped or repeated across pages.
 */
export async function listAuditLogs(services: { db: Db; clock: Clock }, reader: AuditReader, query: AuditLogQuery): Promise<AuditPage> {
  let workspaceId: string | undefined;
  if ("caller" in reader) {
    requirePermission(reader.caller, READ_AUDIT_LOGS_QUERY);
    workspaceId = reader.caller.workspaceId;
    if (query.workspaceId !== undefined && query.workspaceId !== workspaceId) {
      throw new PermissionDeniedError("the operator token, to read another workspace's audit log", [...reader.caller.permissions]);
    }
  } else workspaceId = query.workspaceId;
  const limit = Math.min(Math.max(query.limit ?? DEFAULT_AUDIT_PAGE, 1), MAX_AUDIT_PAGE);
  const after = query.cursor === undefined ? undefined : decodeAuditCursor(query.cursor);
  if (query.cursor !== undefined && after === undefined) throw new TypeError("not an audit log cursor (the adapter validates it)");
  const order = query.order ?? "desc";
  let until = query.until;
  if (order === "asc") {
    const settled = services.clock.now() - AUDIT_SETTLE_MS;
    if (until === undefined || until > settled) until = settled;
    if (query.since !== undefined && until <= query.since) return { entries: [], hasMore: false };
  }
  const rows = await listAuditLogRows(
    services.db,
    { workspaceId, events: query.events, actorId: query.actorId, targetId: query.targetId, since: query.since, until },
    { after, limit: limit + 1, order },
  );
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { entries: page.map(auditEntryOf), hasMore, ...(hasMore && last && { cursor: encodeAuditCursor(last) }) };
}

/** A stored row in readers' words. */
export function auditEntryOf(row: AuditLogRow): AuditEntry {
  const context: AuditEntry["context"] = { surface: row.surface };
  if (row.requestId !== null) context.requestId = row.requestId;
  if (row.clientAddress !== null) context.location = row.clientAddress;
  if (row.userAgent !== null) context.userAgent = row.userAgent;
  const entry: AuditEntry = {
    id: row.id,
    time: row.createdAtM,
    event: row.event,
    workspaceId: row.workspaceId,
    actor: { type: row.actorKind, id: row.actorId, name: row.actorName },
    targets: row.targets.map((t) => (t.name === undefined ? { type: t.type, id: t.id } : { type: t.type, id: t.id, name: t.name })),
    description: row.description,
    context,
  };
  if (row.details !== null) entry.details = row.details;
  return entry;
}

/** The opaque cursor after `position`: base64url of `<time>.<id>`. */
export function encodeAuditCursor(position: AuditPosition): string {
  return Buffer.from(`${position.createdAtM}.${position.id}`, "utf8").toString("base64url");
}

/** The position a cursor of encodeAuditCursor names, or undefined for any other text. */
export function decodeAuditCursor(cursor: string): AuditPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const match = /^(\d{1,16})\.([A-Za-z0-9_]{1,200})$/.exec(text);
  if (!match) return undefined;
  const createdAtM = Number(match[1]);
  if (!Number.isSafeInteger(createdAtM)) return undefined;
  return { createdAtM, id: match[2]! };
}
