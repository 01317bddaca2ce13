import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryInt, queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { findNamespace, listOverridesPage } from "./ratelimits.repository.js";
import { givenNamespace, namespaceSelectorInput, namespaceLabel, overrideOutput } from "./ratelimits.schemas.js";

export const listOverrides = defineRpc({
  method: "GET",
  path: "/v1/ratelimits.listOverrides",
  summary: "Lists a namespace's overrides by id, 1..100 per page; `cursor` continues after the last page.",
  errors: [400, 403, 404, 503],
  returns: "A page of the namespace's overrides, the cursor of the next page and the total.",
  input: z.object({
    ...namespaceSelectorInput,
    limit: queryInt(1, 100).default(100),
    cursor: queryText.min(1).optional(),
  }),
  output: z.object({ overrides: z.array(overrideOutput), cursor: z.string().optional(), total: z.number() }),
  handler: async (input, { deps, authorization }) => {
    const by = givenNamespace(input);
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "ratelimit.*.read_override"] });
    const namespace = await findNamespace(deps.db, auth.workspaceId, by);
    if (!namespace) throw new ApiError("NOT_FOUND", `Namespace ${namespaceLabel(by)} not found`);
    const { rows, total } = await listOverridesPage(deps.db, {
      namespaceId: namespace.id,
      limit: input.limit,
      cursor: input.cursor,
    });
    return {
      overrides: rows,
      // Only when another page may exist: a short page is the last one.
      ...(rows.length === input.limit && { cursor: rows[rows.length - 1]!.id }),
      total,
    };
  },
});
