import { z } from "zod";
import { listRootKeys as listRootKeysCore } from "../../../core/rootKeys/rootKeys.core.js";
import { idInput } from "../inputBounds.js";
import { queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";

export const listRootKeys = defineRpc({
  method: "GET",
  path: "/v1/rootKeys.listRootKeys",
  auth: "admin",
  summary:
    "Operator route (keyhaven extension): lists a workspace's root keys in id order, a page at a time (id, name, start, permissions, creation and last-use time; never the key or its hash).",
  errors: [400, 403, 404, 503],
  returns: "A page of the workspace's root keys, and the cursor of the next page when there is one.",
  input: z.object({
    workspaceId: idInput.describe("The workspace whose root keys to list."),
    limit: queryInt(1, 100).default(100).describe("Root keys per page, 1–100."),
    cursor: queryText.max(255).optional().describe("The `cursor` of the previous page, for the next one."),
  }),
  output: z.object({
    rootKeys: z.array(
      z.object({
        id: z.string(),
        name: z.string().optional(),
        start: z.string().describe("The key's first characters, to recognise it."),
        permissions: z.array(z.string()),
        createdAt: z.number().describe("Unix milliseconds."),
        lastUsedAt: z
          .number()
          .optional()
          .describe("Unix milliseconds of its last authentication, written about once a second; absent when it never authenticated."),
      }),
    ),
    cursor: z.string().optional().describe("Pass it as `cursor` for the next page; absent on the last page."),
  }),
  handler: async (input, { deps }) => {
    const page = await listRootKeysCore(deps, input);
    return {
      rootKeys: page.items.map((k) => ({
        id: k.id,
        ...(k.name !== null && { name: k.name }),
        start: k.start,
        permissions: k.permissions,
        createdAt: k.createdAtM,
        ...(k.lastUsedAtM !== null && { lastUsedAt: k.lastUsedAtM }),
      })),
      ...(page.cursor !== undefined && { cursor: page.cursor }),
    };
  },
});
