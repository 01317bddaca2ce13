import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { findNamespace, findOverride } from "./ratelimits.repository.js";
import { givenNamespace, namespaceSelectorInput, MAX_NAME, overrideOutput } from "./ratelimits.schemas.js";

export const getOverride = defineRpc({
  method: "GET",
  path: "/v1/ratelimits.getOverride",
  summary: "Reads the override of an identifier (matched literally, `*` included) in a namespace.",
  errors: [400, 403, 404, 503],
  returns: "The override.",
  input: z.object({
    ...namespaceSelectorInput,
    identifier: queryText.min(1).max(MAX_NAME),
  }),
  output: overrideOutput,
  handler: async (input, { deps, authorization }) => {
    const by = givenNamespace(input);
    const auth = await authenticateRootKey(deps, authorization);
    // v1 did not accept `*` here; keyhaven does, as a `*` key may do everything else.
    requirePermission(auth, { or: ["*", "ratelimit.*.read_override"] });
    const namespace = await findNamespace(deps.db, auth.workspaceId, by);
    if (!namespace) throw new ApiError("NOT_FOUND", "Namespace not found");
    const override = await findOverride(deps.db, namespace.id, input.identifier);
    if (!override) throw new ApiError("NOT_FOUND", "Override not found");
    return override;
  },
});
