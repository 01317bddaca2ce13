import type { Harness } from "./helper.js";

/** An audit entry as stored (audit_log), in the test's words. */
export type StoredAuditEntry = {
  id: string;
  workspaceId: string | null;
  event: string;
  actorKind: string;
  actorId: string;
  actorName: string;
  targets: { type: string; id: string; name?: string }[];
  description: string;
  details: Record<string, unknown> | null;
  surface: string;
  requestId: string | null;
  clientAddress: string | null;
  userAgent: string | null;
  createdAtM: number;
};

/** The stored audit entries, oldest first; of one workspace, or (`event`) of one event, when asked. */
export async function auditEntries(h: Pick<Harness, "sql">, filter: { workspaceId?: string; event?: string } = {}) {
  const where: string[] = [];
  if (filter.workspaceId !== undefined) where.push(`workspace_id = '${filter.workspaceId.replaceAll("'", "''")}'`);
  if (filter.event !== undefined) where.push(`event = '${filter.event.replaceAll("'", "''")}'`);
  const rows = await h.sql<Record<string, unknown>>(
    `select id, workspace_id, event, actor_kind, actor_id, actor_name, targets, description, details, surface,
            request_id, client_address, user_agent, created_at_m
       from audit_log ${where.length ? `where ${where.join(" and ")}` : ""} order by created_at_m, id`,
  );
  return rows.map(
    (r): StoredAuditEntry => ({
      id: r.id as string,
      workspaceId: r.workspace_id as string | null,
      event: r.event as string,
      actorKind: r.actor_kind as string,
      actorId: r.actor_id as string,
      actorName: r.actor_name as string,
      targets: (typeof r.targets === "string" ? JSON.parse(r.targets) : r.targets) as StoredAuditEntry["targets"],
      description: r.description as string,
      details: (typeof r.details === "string" ? JSON.parse(r.details) : r.details) as Record<string, unknown> | null,
      surface: r.surface as string,
      requestId: r.request_id as string | null,
      clientAddress: r.client_address as string | null,
      userAgent: r.user_agent as string | null,
      createdAtM: Number(r.created_at_m),
    }),
  );
}
