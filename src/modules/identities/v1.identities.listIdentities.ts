import { z } from "zod";
import { requirePermission } from "../../auth/root-key.js";
import { queryInt, queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { identityRatelimits, listIdentitiesPage } from "./identities.repository.js";
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
  handler: async (input, { deps, rootKey: auth }) => {
    requirePermission(auth, { or: ["*", "identity.*.read_identity", `identity.${input.environment}.read_identity`] });
    const { rows, total } = await listIdentitiesPage(deps.db, {
      workspaceId: auth.workspaceId,
      environment: input.environment,
      limit: input.limit,
      cursor: input.cursor,
    });
    const rls = await identityRatelimits(
      deps.db,
      rows.map((r) => r.id),
    );
    return {
      identities: rows.map((r) => ({ id: r.id, externalId: r.externalId, ratelimits: rls.get(r.id) ?? [] })),
      ...(rows.length === input.limit && { cursor: rows[rows.length - 1]!.id }),
      total,
    };
  },
});
