import { z } from "zod";
import { listWorkspaces as listWorkspacesCore } from "../../../core/workspaces/workspaces.core.js";
import { queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";

export const listWorkspaces = defineRpc({
  method: "GET",
  path: "/v1/workspaces.listWorkspaces",
  auth: "admin",
  summary:
    "Operator route (keyhaven extension): lists the workspaces in id order, a page at a time: pass the returned `cursor` to get the next page; there is none after the last.",
  errors: [400, 403, 503],
  returns: "A page of workspaces, and the cursor of the next page when there is one.",
  input: z.object({
    limit: queryInt(1, 100).default(100).describe("Workspaces per page, 1–100."),
    cursor: queryText.max(255).optional().describe("The `cursor` of the previous page, for the next one."),
  }),
  output: z.object({
    workspaces: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        enabled: z.boolean().describe("false: every root key of the workspace is refused."),
        createdAt: z.number().describe("Unix milliseconds."),
      }),
    ),
    cursor: z.string().optional().describe("Pass it as `cursor` for the next page; absent on the last page."),
  }),
  handler: async (input, { deps }) => {
    const page = await listWorkspacesCore(deps, input);
    return {
      workspaces: page.items.map((w) => ({ id: w.id, name: w.name, enabled: w.enabled, createdAt: w.createdAtM })),
      ...(page.cursor !== undefined && { cursor: page.cursor }),
    };
  },
});
