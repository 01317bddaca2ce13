import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { findIdentity, identityRatelimits } from "./identities.repository.js";
import { meta, ratelimitOutput } from "./identities.schemas.js";

export const getIdentity = defineRpc({
  method: "GET",
  path: "/v1/identities.getIdentity",
  summary: "Reads an identity by id or by externalId, with its rate limits.",
  input: z.object({ identityId: queryText.min(1).optional(), externalId: queryText.min(1).optional() }),
  output: z.object({ id: z.string(), externalId: z.string(), meta, ratelimits: z.array(ratelimitOutput) }),
  handler: async (input, { deps, authorization }) => {
    // Before authentication, as v1 did.
    if (input.identityId === undefined && input.externalId === undefined) {
      throw new ApiError("BAD_REQUEST", "Provide either identityId or externalId");
    }
    const auth = await authenticateRootKey(deps.db, authorization);
    const row = await findIdentity(
      deps.db,
      auth.workspaceId,
      input.identityId !== undefined ? { identityId: input.identityId } : { externalId: input.externalId! },
    );
    const idForPermission = row?.id ?? input.identityId ?? "*";
    requirePermission(auth, { or: ["*", "identity.*.read_identity", `identity.${idForPermission}.read_identity`] });
    if (!row) throw new ApiError("NOT_FOUND", `identity ${input.identityId ?? input.externalId} not found`);
    const rls = (await identityRatelimits(deps.db, [row.id])).get(row.id) ?? [];
    return { id: row.id, externalId: row.externalId, meta: (row.meta as Record<string, unknown> | null) ?? {}, ratelimits: rls };
  },
});
