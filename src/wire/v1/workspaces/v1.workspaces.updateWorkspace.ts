import { z } from "zod";
import { defineRpc } from "../rpc.js";
import { operatorCaller } from "./operator.caller.js";
import { idInput } from "../inputBounds.js";
import { enableWorkspace } from "../../../core/workspaces/workspaces.core.js";

export const updateWorkspace = defineRpc({
  method: "POST",
  path: "/v1/workspaces.updateWorkspace",
  auth: "admin",
  summary:
    "Operator route (keyhaven extension): enables or disables a workspace. A disabled workspace answers every root-key call with 403 FORBIDDEN.",
  errors: [400, 403, 404, 503],
  returns: "The workspace is enabled or disabled.",
  input: z.object({ workspaceId: idInput, enabled: z.boolean() }),
  output: z.object({}),
  handler: async (input, { deps, req }) => {
    await enableWorkspace(deps, operatorCaller(deps, req, input.workspaceId), input);
    return {};
  },
});
