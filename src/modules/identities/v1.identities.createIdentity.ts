import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { isUniqueViolation } from "../../db/client.js";
import { ApiError } from "../../errors.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { insertIdentity } from "./identities.repository.js";
import { assertMetaSize, externalIdInput, meta, ratelimitsInput } from "./identities.schemas.js";

export const createIdentity = defineRpc({
  method: "POST",
  path: "/v1/identities.createIdentity",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Creates an identity (externalId unique in the workspace) with optional meta and named rate limits.",
  errors: [400, 403, 409, 503],
  returns: "The new identity's id.",
  input: z.object({ externalId: externalIdInput, meta: meta.optional(), ratelimits: ratelimitsInput.optional() }),
  output: z.object({ identityId: z.string() }),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "identity.*.create_identity"] });
    assertMetaSize(input.meta);
    const names = new Set<string>();
    for (const r of input.ratelimits ?? []) {
      if (names.has(r.name)) throw new ApiError("CONFLICT", `Ratelimit with name "${r.name}" is already defined in the request`);
      names.add(r.name);
    }
    try {
      const identityId = await insertIdentity(deps.db, {
        workspaceId: auth.workspaceId,
        externalId: input.externalId,
        meta: input.meta,
        ratelimits: input.ratelimits ?? [],
      });
      return { identityId };
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ApiError("CONFLICT", `Identity with externalId "${input.externalId}" already exists in this workspace`);
      }
      throw err;
    }
  },
});
