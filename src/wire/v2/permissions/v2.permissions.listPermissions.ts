import { z } from "zod";
import { listPermissionsPage } from "../../../core/rbac/rbac.rolesPermissions.js";
import { pageInput, pageOf } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";
import { permissionData, permissionOutput } from "./permissions.schemas.js";

export const listPermissions = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.listPermissions",
  auth: "rootKey",
  summary: "Lists the workspace's permissions by id, a page at a time; `search` matches id, name, slug or description.",
  errors: [400, 401, 403, 503],
  returns: "A page of permissions.",
  paginated: true,
  input: z
    .object({ ...pageInput, search: z.string().max(256).optional().describe("Case-insensitive substring; `%` and `_` are literal.") })
    .strict(),
  output: z.array(permissionOutput),
  handler: async (input, { deps, caller }) => {
    const limit = input.limit ?? 100;
    const rows = await listPermissionsPage(deps, caller, {
      fromId: input.cursor,
      limit: limit + 1,
      search: input.search?.trim() || undefined,
    });
    const page = pageOf(rows, limit);
    return { data: page.rows.map(permissionData), pagination: page.pagination };
  },
});
