import type { FastifyError, FastifyPluginAsync } from "fastify";
import { acceptJsonBodies, type SurfaceOptions } from "../../http/surface.js";
import type { Services } from "../../services.js";
import { answerV2Error, answerV2NotFound } from "./answer.js";
import { v2Rpcs } from "./routes.js";
import { registerV2Rpc } from "./rpc.js";

/**
 * The v2 surface, registered by app.ts under `/v2`: its JSON body guard (which honours a route's `lookupOnly`), its
 * error handler (every failure in v2's envelope, answer.ts), its 404 and 405, and its routes (wire/v2/routes.ts).
 */
export const v2Surface: FastifyPluginAsync<SurfaceOptions & { deps: Services }> = async (app, { deps }) => {
  acceptJsonBodies(app, { lookupOnly: true });
  app.setErrorHandler((err: FastifyError, req, reply) => answerV2Error(err, req, reply));
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "";
    return answerV2NotFound(
      req,
      reply,
      v2Rpcs.filter((r) => r.path === path).map((r) => r.method),
    );
  });
  for (const rpc of v2Rpcs) registerV2Rpc(app, deps, rpc);
};
