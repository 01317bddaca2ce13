import type { FastifyError, FastifyPluginAsync } from "fastify";
import { hasZodFastifySchemaValidationErrors } from "fastify-type-provider-zod";
import { DomainError } from "../../errors.js";
import { acceptJsonBodies, answerInEnvelope, answerNoRoute, type SurfaceOptions, sendEnvelope } from "../../http/surface.js";
import type { Services } from "../../services.js";
import { issueText } from "../../validation.messages.js";
import { apiErrorOf } from "./errors.js";
import { operatorSurface } from "./operator.surface.js";
import { rpcs, v1OwnRpcs } from "./routes.js";
import { BULK_BODY_LIMIT, registerRpc } from "./rpc.js";

/**
 * The v1 surface, registered by app.ts under `/v1`: its JSON body guard, its error handler (the envelope, domain
 * errors through apiErrorOf), its 404 and 405, its routes (wire/v1/routes.ts), and the operator surface within it.
 */
export const v1Surface: FastifyPluginAsync<SurfaceOptions & { deps: Services }> = async (app, { deps, origin }) => {
  acceptJsonBodies(app, { lookupOnly: false });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    // The core throws domain errors; here, and only here, they become v1's codes and statuses (apiErrorOf).
    const answered = err instanceof DomainError ? apiErrorOf(err) : err;
    if (hasZodFastifySchemaValidationErrors(answered)) {
      // v1 answered with the first issue only.
      const first = answered.validation[0];
      const path = first ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "";
      const params = (first?.params as { params?: unknown } | undefined)?.params;
      // A bulk route's body is an array: the first step of the path is the index of the key refused.
      const index = Array.isArray(req.body) ? /^\/(\d+)(?:\/|$)/.exec(first?.instancePath ?? "")?.[1] : undefined;
      const fields = index === undefined ? undefined : { keyIndex: Number(index) };
      return sendEnvelope(reply, req, origin, "BAD_REQUEST", issueText(path, first?.message ?? "invalid input", params), fields);
    }
    return answerInEnvelope(answered as FastifyError, req, reply, origin, BULK_BODY_LIMIT);
  });

  const knownPaths = new Set<string>(rpcs.map((r) => r.path));
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "";
    if (!knownPaths.has(path)) return answerNoRoute(req, reply, origin);
    const allowed = rpcs.filter((r) => r.path === path).map((r) => r.method);
    reply.header("Allow", allowed.join(", "));
    return sendEnvelope(reply, req, origin, "METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use ${allowed.join(" or ")}`);
  });

  for (const rpc of v1OwnRpcs) registerRpc(app, deps, rpc);
  // The operator routes, under this prefix and in this envelope, by their own plugin.
  await app.register(operatorSurface, { deps });
};
