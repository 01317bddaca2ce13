import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { defineRpc } from "../../rpc.js";
import { listWorkspaceRoles } from "./permissions.repository.js";
import { roleOutput, toRoleOutput } from "./permissions.schemas.js";

export const listRoles = defineRpc({
  method: "GET",
  path: "/v1/permissions.listRoles",
  summary: "Lists every role of the workspace, oldest first (no pagination, as in v1).",
  errors: [403, 503],
  returns: "Every role of the workspace.",
  input: z.object({}),
  output: z.array(roleOutput),
  handler: async (_input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.read_role"] });
    return (await listWorkspaceRoles(deps.db, auth.workspaceId)).map(toRoleOutput);
  },
});
