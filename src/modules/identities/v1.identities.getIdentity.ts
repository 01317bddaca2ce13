import { z } from "zod";
import { describeQuery, type PermissionQuery } from "../../auth/permissions.js";
import { authenticateRootKey, hasPermission, missingPermissions, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { findIdentity, identityRatelimits } from "./identities.repository.js";
import { meta, ratelimitOutput } from "./identities.schemas.js";

export const getIdentity = defineRpc({
  method: "GET",
  path: "/v1/identities.getIdentity",
  summary: "Reads an identity by id or by externalId, with its rate limits.",
  errors: [400, 403, 404, 503],
  returns: "The identity, with its meta and rate limits.",
  input: z.object({ identityId: queryText.min(1).optional(), externalId: queryText.min(1).optional() }),
  output: z.object({ id: z.string(), externalId: z.string(), meta, ratelimits: z.array(ratelimitOutput) }),
  handler: async (input, { deps, authorization }) => {
    // Before authentication, as v1 did.
    if (input.identityId === undefined && input.externalId === undefined) {
      throw new ApiError("BAD_REQUEST", "Provide either identityId or externalId");
    }
    const auth = await authenticateRootKey(deps, authorization);
    const anyIdentity: PermissionQuery = { or: ["*", "identity.*.read_identity"] };
    // By id the permission is known before the lookup. By externalId it is too for `*` and identity.*; a root key
    // with read_identity on some identities only learns neither the id behind the externalId nor whether it exists.
    if (input.identityId !== undefined) {
      requirePermission(auth, { or: [...anyIdentity.or, `identity.${input.identityId}.read_identity`] });
    }
    const row = await findIdentity(
      deps.db,
      auth.workspaceId,
      input.identityId !== undefined ? { identityId: input.identityId } : { externalId: input.externalId! },
    );
    const byExternalId = row && input.identityId === undefined ? [`identity.${row.id}.read_identity`] : [];
    if (input.identityId === undefined && !hasPermission(auth, { or: [...anyIdentity.or, ...byExternalId] })) {
      throw missingPermissions(
        auth,
        `${describeQuery(anyIdentity)} or read_identity on the identity with externalId ${JSON.stringify(input.externalId)}`,
      );
    }
    if (!row) throw new ApiError("NOT_FOUND", `identity ${input.identityId ?? input.externalId} not found`);
    const rls = (await identityRatelimits(deps.db, [row.id])).get(row.id) ?? [];
    return { id: row.id, externalId: row.externalId, meta: (row.meta as Record<string, unknown> | null) ?? {}, ratelimits: rls };
  },
});
