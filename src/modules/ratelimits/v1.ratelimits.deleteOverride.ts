import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { findNamespace, softDeleteOverride } from "./ratelimits.repository.js";
import { givenNamespace, namespaceSelectorInput, MAX_NAME, namespaceLabel } from "./ratelimits.schemas.js";

export const deleteOverride = defineRpc({
  method: "POST",
  path: "/v1/ratelimits.deleteOverride",
  summary: "Deletes the override of an identifier (matched literally) in a namespace; the next limit call no longer sees it.",
  errors: [400, 403, 404, 503],
  returns: "The override is deleted.",
  input: z.object({
    ...namespaceSelectorInput,
    identifier: z.string().min(1).max(MAX_NAME),
  }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const by = givenNamespace(input);
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "ratelimit.*.delete_override"] });
    const namespace = await findNamespace(deps.db, auth.workspaceId, by);
    if (!namespace) throw new ApiError("NOT_FOUND", `Namespace ${namespaceLabel(by)} not found`);
    if (!(await softDeleteOverride(deps.db, namespace.id, input.identifier))) {
      throw new ApiError("NOT_FOUND", `Override with ${input.identifier} identifier not found`);
    }
    return {};
  },
});
