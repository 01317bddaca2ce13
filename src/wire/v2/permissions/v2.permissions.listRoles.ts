import { z } from "zod";
import { listRolesPage } from "../../../core/rbac/rbac.rolesPermissions.js";
import { pageInput, pageOf } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";
import { roleData, roleOutput } from "./permissions.schemas.js";

export const listRoles = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.listRoles",
  auth: "rootKey",
  summary: "Lists the workspace's roles by id, each with its permissions, a page at a time; `search` matches id, name or description.",
  errors: [400, 401, 403, 503],
  returns: "A page of roles.",
  paginated: true,
  input: z
    .object({ ...pageInput, search: z.string().max(256).optional().describe("Case-insensitive substring; `%` and `_` are literal.") })
    .strict(),
  output: z.array(roleOutput),
  handler: async (input, { deps, caller }) => {
    const limit = input.limit ?? 100;
    const rows = await listRolesPage(deps, caller, { fromId: input.cursor, limit: limit + 1, search: input.search?.trim() || undefined });
    const page = pageOf(rows, limit);
    return { data: page.rows.map(roleData), pagination: page.pagination };
  },
});
