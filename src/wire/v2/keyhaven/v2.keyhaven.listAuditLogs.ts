import { z } from "zod";
import { AUDIT_EVENTS } from "../../../core/audit/audit.events.js";
import {
  AUDIT_SETTLE_MS,
  type AuditReader,
  DEFAULT_AUDIT_PAGE,
  decodeAuditCursor,
  listAuditLogs as listAuditLogsCore,
  MAX_AUDIT_PAGE,
} from "../../../core/audit/audit.read.js";
import { defineV2Rpc } from "../rpc.js";

const unixMs = z.int().min(0).max(Number.MAX_SAFE_INTEGER);
const target = z.object({
  type: z.string().describe("What it is: key, api, role, permission, identity, workspace, rootKey, …"),
  id: z.string().describe("Its id."),
  name: z.string().optional().describe("Its name, when it has one worth showing."),
});

/** An audit entry as the route answers it (and `keyhaven audit export` prints it); docs/audit.md. */
export const auditEntrySchema = z.object({
  id: z.string().describe("The entry's id."),
  time: z.number().describe("When the change was made (unix ms)."),
  event: z.string().describe("What happened (docs/audit.md lists every event)."),
  workspaceId: z.string().nullable().describe("The workspace changed; null for a change above every workspace."),
  actor: z
    .object({
      type: z.string().describe("root_key, operator, worker or cli."),
      id: z.string().describe("The root key's id; `operator`, the worker's or the command's name."),
      name: z.string().describe("A name to show (a root key's name, else its id)."),
    })
    .describe("Who made the change."),
  targets: z.array(target).describe("What the change touched (several for a bulk change)."),
  description: z.string().describe("A short sentence for people."),
  details: z
    .record(z.string(), z.unknown())
    .optional()
    .describe("What else is worth keeping: the names of the fields changed (never their values), counts."),
  context: z
    .object({
      surface: z.string().describe("v1, v2, operator, cli or worker."),
      requestId: z.string().optional().describe("The request's id (its Unkey-Request-Id / meta.requestId)."),
      location: z.string().optional().describe("The client's address (KEYHAVEN_TRUST_PROXY decides whose)."),
      userAgent: z.string().optional().describe("The client's User-Agent (at most 512 characters)."),
    })
    .describe("Where the change came from."),
});

export const listAuditLogs = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.listAuditLogs",
  auth: "rootKeyOrOperator",
  summary:
    "keyhaven extension: reads the audit log, newest first (or oldest first), a page at a time. A root key needs `audit.*.read_logs` (or `*`) and reads its workspace's entries; the operator token (KEYHAVEN_ADMIN_TOKEN) reads every workspace's, or one's with `workspaceId`.",
  errors: [400, 401, 403, 503],
  returns: 'A page of audit entries, newest first (or oldest first with `order: "asc"`).',
  paginated: true,
  input: z
    .object({
      events: z.array(z.enum(AUDIT_EVENTS)).min(1).max(AUDIT_EVENTS.length).optional().describe("Only entries of these events."),
      actorId: z.string().min(1).max(255).optional().describe("Only entries made by this actor (a root key's id, `operator`, …)."),
      targetId: z.string().min(1).max(255).optional().describe("Only entries naming this id among their targets."),
      since: unixMs.optional().describe("Only entries written at or after this time (unix ms)."),
      until: unixMs.optional().describe("Only entries written before this time (unix ms, exclusive)."),
      workspaceId: z
        .string()
        .min(1)
        .max(255)
        .optional()
        .describe("The operator token: only this workspace's entries. A root key may name only its own workspace."),
      limit: z
        .int()
        .min(1)
        .max(MAX_AUDIT_PAGE)
        .optional()
        .describe(`Entries per page, 1 to ${MAX_AUDIT_PAGE} (default ${DEFAULT_AUDIT_PAGE}).`),
      cursor: z
        .string()
        .max(1024)
        .refine((c) => decodeAuditCursor(c) !== undefined, "is not a cursor this route returned")
        .optional()
        .describe("The `pagination.cursor` of the previous page."),
      order: z
        .enum(["desc", "asc"])
        .optional()
        .describe(
          `desc: newest first (default). asc: oldest first, leaving out the last ${AUDIT_SETTLE_MS / 1000} s, whose entries may still be committing: a later call reads them.`,
        ),
    })
    .strict()
    .refine((q) => q.since === undefined || q.until === undefined || q.since < q.until, {
      error: "since must be before until",
      path: ["since"],
    }),
  output: z.array(auditEntrySchema),
  handler: async (input, { deps, by }) => {
    const reader: AuditReader = by.kind === "operator" ? { operator: true } : { caller: by.caller };
    const page = await listAuditLogsCore(deps, reader, input);
    return {
      data: page.entries,
      pagination: { hasMore: page.hasMore, ...(page.cursor !== undefined && { cursor: page.cursor }) },
    };
  },
});
