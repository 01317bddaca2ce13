import { z } from "zod";
import { givenNamespace, listOverrides as listOverridesCore } from "../../../core/ratelimits/ratelimits.core.js";
import { queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { namespaceSelectorInput, overrideOutput } from "./ratelimits.schemas.js";

export const listOverrides = defineRpc({
  method: "GET",
  path: "/v1/ratelimits.listOverrides",
  auth: "rootKey",
  summary: "Lists a namespace's overrides by id, 1..100 per page; `cursor` continues after the last page.",
  errors: [400, 403, 404, 503],
  returns: "A page of the namespace's overrides, the cursor of the next page and the total.",
  input: z.object({
    ...namespaceSelectorInput,
    limit: queryInt(1, 100).default(100),
    cursor: queryText.min(1).optional(),
  }),
  output: z.object({ overrides: z.array(overrideOutput), cursor: z.string().optional(), total: z.number() }),
  // Which namespace is checked before authentication, as before.
  beforeAuth: (input) => givenNamespace(input),
  handler: (input, { deps, caller, checked: by }) => listOverridesCore(deps, caller, by, { limit: input.limit, cursor: input.cursor }),
});
