import { z } from "zod";
import { listIdentities as listIdentitiesCore } from "../../../core/identities/identities.core.js";
import { queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { ratelimitOutput } from "./identities.schemas.js";

export const listIdentities = defineRpc({
  method: "GET",
  path: "/v1/identities.listIdentities",
  auth: "rootKey",
  summary: "Lists the identities of an environment, by id, 1..100 per page; `cursor` continues after the last page.",
  errors: [400, 403, 503],
  returns: "A page of identities, the cursor of the next page when there is one, and the total.",
  input: z.object({
    environment: queryText.min(1).default("default"),
    limit: queryInt(1, 100).default(100),
    cursor: queryText.min(1).optional(),
  }),
  output: z.object({
    identities: z.array(z.object({ id: z.string(), externalId: z.string(), ratelimits: z.array(ratelimitOutput) })),
    cursor: z.string().optional(),
    total: z.number(),
  }),
  handler: (input, { deps, rootKey }) =>
    listIdentitiesCore(deps, rootKey, { environment: input.environment, limit: input.limit, cursor: input.cursor }),
});
