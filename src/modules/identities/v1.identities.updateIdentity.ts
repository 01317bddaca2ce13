import { z } from "zod";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { findIdentity, identityRatelimits, updateIdentity as writeIdentity } from "./identities.repository.js";
import { assertMetaSize, meta, ratelimitOutput, ratelimitsInput } from "./identities.schemas.js";

export const updateIdentity = defineRpc({
  method: "POST",
  path: "/v1/identities.updateIdentity",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Updates an identity's meta and reconciles its rate limits by name (update, insert, delete) in one transaction.",
  errors: [400, 403, 404, 409, 503],
  returns: "The identity after the change.",
  input: z.object({
    identityId: idInput.optional(),
    externalId: z.string().min(1).max(256).optional(),
    environment: z.string().min(1).max(256).default("default"),
    meta: meta.optional(),
    ratelimits: ratelimitsInput.optional(),
  }),
  output: z.object({ id: z.string(), externalId: z.string(), meta, ratelimits: z.array(ratelimitOutput) }),
  handler: async (input, { deps, rootKey: auth }) => {
    requirePermission(auth, { or: ["*", "identity.*.update_identity"] });
    if (input.identityId === undefined && input.externalId === undefined) {
      throw new ApiError("BAD_REQUEST", "Provide either identityId or externalId");
    }
    assertMetaSize(input.meta);
    const names = new Set<string>();
    for (const r of input.ratelimits ?? []) {
      if (names.has(r.name)) throw new ApiError("CONFLICT", `Ratelimit with name "${r.name}" is already defined in the request`);
      names.add(r.name);
    }
    const row = await findIdentity(
      deps.db,
      auth.workspaceId,
      input.identityId !== undefined ? { identityId: input.identityId } : { externalId: input.externalId!, environment: input.environment },
    );
    if (!row) throw new ApiError("NOT_FOUND", `identity ${input.identityId ?? input.externalId} not found`);
    await writeIdentity(deps.db, {
      workspaceId: auth.workspaceId,
      identityId: row.id,
      meta: input.meta,
      ratelimits: input.ratelimits,
    });
    const rls = (await identityRatelimits(deps.db, [row.id])).get(row.id) ?? [];
    const newMeta = input.meta ?? (row.meta as Record<string, unknown> | null) ?? {};
    return { id: row.id, externalId: row.externalId, meta: newMeta, ratelimits: rls };
  },
});
