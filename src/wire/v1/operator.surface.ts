import type { FastifyPluginAsync } from "fastify";
import type { Services } from "../../services.js";
import { operatorRpcs } from "./routes.js";
import { registerRpc } from "./rpc.js";

/**
 * The operator surface (workspaces, root keys, an import's retry: KEYHAVEN_ADMIN_TOKEN), a plugin of its own that the
 * v1 surface registers within its prefix: its routes keep their `/v1/…` paths and answer in v1's envelope (the v1
 * surface's error handler, 404 and body parser, which this plugin inherits), and build the operator's caller
 * (workspaces/operator.caller.ts). A route of another surface never takes the admin token alone
 * (test/surfaces.test.ts).
 */
export const operatorSurface: FastifyPluginAsync<{ deps: Services }> = async (app, { deps }) => {
  for (const rpc of operatorRpcs) registerRpc(app, deps, rpc);
};
