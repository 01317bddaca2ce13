import { z } from "zod";
import { defineRpc } from "../rpc.js";
import { operatorCaller } from "./operator.caller.js";
import { createWorkspace as create } from "../../../core/workspaces/workspaces.core.js";

export const createWorkspace = defineRpc({
  method: "POST",
  path: "/v1/workspaces.createWorkspace",
  auth: "admin",
  summary: "Operator route (keyhaven extension): creates a workspace. Needs the admin token.",
  errors: [400, 403, 503],
  returns: "The new workspace's id.",
  input: z.object({ name: z.string().trim().min(1).max(256) }),
  output: z.object({ workspaceId: z.string() }),
  handler: async (input, { deps, req }) => {
    return { workspaceId: await create(deps, operatorCaller(deps, req, ""), input) };
  },
});
