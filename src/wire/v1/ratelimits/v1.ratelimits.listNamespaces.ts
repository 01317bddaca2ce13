import { z } from "zod";
import { listNamespaces as listNamespacesCore } from "../../../core/ratelimits/ratelimits.core.js";
import { queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { MAX_NAME } from "./ratelimits.schemas.js";

/**
 * keyhaven extension: v1 clients name a namespace by `namespaceId` on the override routes, and ratelimits.limit
 * creates namespaces by name only, so this is where a client learns the ids.
 */
export const listNamespaces = defineRpc({
  method: "GET",
  path: "/v1/ratelimits.listNamespaces",
  auth: "rootKey",
  summary:
    "keyhaven extension: lists the workspace's rate-limit namespaces with their ids, by name, 1..100 per page; `cursor` (the last name of a page) continues after it.",
  errors: [400, 403, 503],
  returns: "A page of the workspace's namespaces with their ids, and the total.",
  input: z.object({
    limit: queryInt(1, 100).default(100),
    cursor: queryText.min(1).max(MAX_NAME).optional(),
  }),
  output: z.object({
    namespaces: z.array(z.object({ id: z.string(), name: z.string() })),
    cursor: z.string().optional(),
    total: z.number(),
  }),
  handler: (input, { deps, rootKey }) => listNamespacesCore(deps, rootKey, { limit: input.limit, cursor: input.cursor }),
});
