import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { findNamespace, upsertOverride } from "./ratelimits.repository.js";
import { givenNamespace, namespaceSelectorInput, durationSchema, limitSchema, MAX_NAME, namespaceLabel } from "./ratelimits.schemas.js";

export const setOverride = defineRpc({
  method: "POST",
  path: "/v1/ratelimits.setOverride",
  summary:
    "Sets the limit of an identifier (or of every identifier a `*` pattern matches) in a namespace, creating or replacing its override.",
  errors: [400, 403, 404, 503],
  returns: "The override's id.",
  input: z.object({
    ...namespaceSelectorInput,
    identifier: z.string().min(3).max(MAX_NAME),
    limit: limitSchema(0),
    duration: durationSchema,
    async: z.boolean().default(false),
  }),
  output: z.object({ overrideId: z.string() }),
  handler: async (input, { deps, authorization }) => {
    const by = givenNamespace(input);
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "ratelimit.*.set_override"] });
    const namespace = await findNamespace(deps.db, auth.workspaceId, by);
    if (!namespace) throw new ApiError("NOT_FOUND", `Namespace ${namespaceLabel(by)} not found`);
    const overrideId = await upsertOverride(deps.db, {
      workspaceId: auth.workspaceId,
      namespaceId: namespace.id,
      identifier: input.identifier,
      limit: input.limit,
      duration: input.duration,
      async: input.async,
    });
    return { overrideId };
  },
});
