import { z } from "zod";
import { assertIdentitySelector, getIdentity as getIdentityCore } from "../../../core/identities/identities.core.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { meta, ratelimitOutput } from "./identities.schemas.js";

export const getIdentity = defineRpc({
  method: "GET",
  path: "/v1/identities.getIdentity",
  auth: "rootKey",
  summary: "Reads an identity by id or by externalId, with its rate limits.",
  errors: [400, 403, 404, 503],
  returns: "The identity, with its meta and rate limits.",
  input: z.object({ identityId: queryText.min(1).optional(), externalId: queryText.min(1).optional() }),
  output: z.object({ id: z.string(), externalId: z.string(), meta, ratelimits: z.array(ratelimitOutput) }),
  // Before authentication, as v1 did.
  beforeAuth: (input) => assertIdentitySelector(input),
  handler: (input, { deps, rootKey }) => getIdentityCore(deps, rootKey, { identityId: input.identityId, externalId: input.externalId }),
});
