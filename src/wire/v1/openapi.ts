import { readFileSync } from "node:fs";
import swagger from "@fastify/swagger";
import scalar from "@scalar/fastify-api-reference";
import type { FastifyInstance } from "fastify";
import { createJsonSchemaTransform } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Config } from "../../config.js";
import { codeToStatus, type ErrorCode, type ErrorEnvelope, errorCodes } from "../../http/errors.js";
import { bodyLimitOf, type Rpc } from "./rpc.js";

export const packageVersion = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

/** The one error envelope, as a zod schema: the statuses below narrow `code` to the codes that status carries. */
function errorEnvelopeSchema(codes: readonly ErrorCode[]) {
  return z.object({
    error: z.object({
      code: z.enum(codes as [ErrorCode, ...ErrorCode[]]).describe("Machine-readable error code."),
      docs: z.string().describe("This server's page on the code: `<origin>/docs/errors/<CODE>`."),
      message: z.string().describe("What went wrong; for validation errors `<path>: <message>` of the first bad field."),
      requestId: z.string().describe("The request id, also sent as the `Unkey-Request-Id` header."),
      keyIndex: z
        .number()
        .int()
        .optional()
        .describe("keyhaven addition, on refusals of a bulk import: the index of the key refused in the request's array."),
      reason: z
        .enum(["KEY_EXISTS", "DUPLICATE_IN_REQUEST"])
        .optional()
        .describe("keyhaven addition, on an import's 409: the key at `keyIndex` exists already, or repeats the one at `sameAsKeyIndex`."),
      sameAsKeyIndex: z.number().int().optional().describe("keyhaven addition: the earlier key a `DUPLICATE_IN_REQUEST` repeats."),
      missingRoles: z.array(z.string()).optional().describe("keyhaven addition, on an import's 412: the role names missing."),
      missingPermissions: z.array(z.string()).optional().describe("keyhaven addition, on an import's 412: the permission names missing."),
    }),
  });
}
// The schema and the envelope errors.ts writes must stay the same shape.
const envelopeMatchesType: z.infer<ReturnType<typeof errorEnvelopeSchema>> extends ErrorEnvelope
  ? ErrorEnvelope extends z.infer<ReturnType<typeof errorEnvelopeSchema>>
    ? true
    : never
  : never = true;
void envelopeMatchesType;

const codesByStatus = new Map<number, ErrorCode[]>();
for (const code of errorCodes) {
  const status = codeToStatus[code];
  codesByStatus.set(status, [...(codesByStatus.get(status) ?? []), code]);
}

const statusTitles: Record<number, string> = {
  400: "Bad request: invalid JSON, a wrong Content-Type, or a field that fails validation (the message names it).",
  403: "Refused: no root key, an unknown or unfit one, a missing permission, or a disabled workspace. v1 answers UNAUTHORIZED with 403, never 401.",
  404: "Not found: the resource does not exist, was deleted, or belongs to another workspace.",
  409: "Conflict: the request would create something that already exists.",
  412: "Precondition failed: something the request relies on is missing, or the API is delete-protected.",
  500: "Unexpected error inside keyhaven; nothing of the request was committed unless it completed.",
  503: "PostgreSQL or Redis could not serve the request (unreachable, too slow, or out of disk), or, on readiness, this replica is not ready; the message names which.",
};

export const errorComponentName = (status: number) => `Error${status}`;

/** Error component schemas, one per status, each listing the codes that status carries. */
function errorComponents(): Record<string, Record<string, unknown>> {
  const components: Record<string, Record<string, unknown>> = {};
  for (const [status, codes] of codesByStatus) {
    const { $schema: _, ...schema } = z.toJSONSchema(errorEnvelopeSchema(codes), { target: "draft-2020-12" }) as Record<string, unknown>;
    components[errorComponentName(status)] = { ...schema, description: `Error envelope with HTTP ${status}: ${codes.join(", ")}.` };
  }
  return components;
}

/**
 * The error statuses a route can answer: those it declares (`errors` in its definition), 413 when it takes a body,
 * and 500. 405 (another method) and 408 (a client too slow to send its request) come from the server, not the
 * route, and are described once in the document's description.
 */
export function errorStatusesOf(rpc: Rpc): number[] {
  const statuses = new Set<number>([...rpc.errors, 500]);
  if (rpc.method === "POST") statuses.add(413);
  return [...statuses].sort((a, b) => a - b);
}

function errorResponse(status: number, rpc: Rpc) {
  const codes = codesByStatus.get(status) ?? [];
  const links = codes.map((c) => `[${c}](/docs/errors/${c})`).join(", ");
  const title = status === 413 ? `The request body is larger than ${bodyLimitOf(rpc)} bytes, this route's limit.` : statusTitles[status];
  return {
    description: `${title ?? `HTTP ${status}`} Codes: ${links}.`,
    content: { "application/json": { schema: { $ref: `#/components/schemas/${errorComponentName(status)}` } } },
  };
}

const operationName = (rpc: Rpc) => rpc.path.slice("/v1/".length);
const serviceOf = (rpc: Rpc) => {
  const name = operationName(rpc);
  return name.includes(".") ? name.slice(0, name.indexOf(".")) : "health";
};

/** keys.verifyKey ("optionalRootKey") is documented as needing nothing: its summary says what a root key adds. */
const securityOf = (rpc: Rpc) =>
  rpc.auth === "none" || rpc.auth === "optionalRootKey" ? [] : [{ [rpc.auth === "admin" ? "adminToken" : "rootKey"]: [] }];

const tagDescriptions: Record<string, string> = {
  health: "Liveness (the process is up) and readiness (PostgreSQL and Redis answer). No authentication.",
  workspaces: "Operator routes (keyhaven extension): take `Authorization: Bearer <KEYHAVEN_ADMIN_TOKEN>`.",
  rootKeys: "Operator routes (keyhaven extension): take `Authorization: Bearer <KEYHAVEN_ADMIN_TOKEN>`.",
};

/**
 * GET /openapi.json: an OpenAPI 3.1 document built by @fastify/swagger from the zod schemas the routes validate
 * with (through fastify-type-provider-zod's transform), plus the error envelopes and security schemes; and
 * GET /docs: Scalar's API reference rendering it, with its script served by this server (no CDN, no fonts,
 * no telemetry), so it works offline. Call it before the routes are registered: swagger collects them as they come.
 */
/**
 * Another wire adapter's part of the one document: its tags, its components, and its operations (undefined for a
 * route that is not its own).
 */
export type OpenApiPart = {
  tags: { name: string; description?: string }[];
  components: Record<string, Record<string, unknown>>;
  operation: (method: string, url: string, schema: () => Record<string, unknown>) => Record<string, unknown> | undefined;
};

export async function registerOpenApi(
  app: FastifyInstance,
  config: Config,
  rpcs: readonly Rpc[],
  others: readonly OpenApiPart[] = [],
): Promise<void> {
  const byRoute = new Map(rpcs.map((rpc) => [`${rpc.method} ${rpc.path}`, rpc]));
  const zodTransform = createJsonSchemaTransform({ skipList: [] });
  const tags = [
    ...[...new Set(rpcs.map(serviceOf))].map((name) => ({
      name,
      ...(tagDescriptions[name] && { description: tagDescriptions[name] }),
    })),
    ...others.flatMap((part) => part.tags),
  ];

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "keyhaven",
        version: packageVersion,
        description:
          "Self-hosted API key management speaking the Unkey v1 HTTP API. Every route is `/v1/<service>.<method>`: " +
          "GET with query parameters for reads, POST with a JSON body for writes. Every response carries " +
          "`Unkey-Request-Id`; every error is the envelope `{error: {code, docs, message, requestId}}` " +
          "(see [the error codes](/docs/errors)); the import routes' refusals add `keyIndex` and the like for programs. Each operation lists the error statuses it can answer; any route " +
          "also answers 405 `METHOD_NOT_ALLOWED` to another method and 408 `REQUEST_TIMEOUT` to a client that does not " +
          "send its whole request in time. Routes under `/v2/` (the `v2 …` tags) speak Unkey's v2 API instead: POST with " +
          "a JSON body, answers `{meta: {requestId}, data}`, errors `{meta, error: {title, detail, status, type}}`.",
      },
      // Always a server, so that the request examples on /docs have a host: the configured public origin, else the
      // server the document was fetched from (a relative URL, never the request's Host header, which clients set).
      servers: [
        config.publicUrl
          ? { url: config.publicUrl, description: "KEYHAVEN_PUBLIC_URL" }
          : { url: "/", description: "The server this document was fetched from (KEYHAVEN_PUBLIC_URL is not set)." },
      ],
      tags,
      components: {
        securitySchemes: {
          rootKey: {
            type: "http",
            scheme: "bearer",
            description:
              "A root key of the workspace (printed on first start, set with KEYHAVEN_ROOT_KEY, or created by an operator), " +
              "holding the permission the route names.",
          },
          adminToken: {
            type: "http",
            scheme: "bearer",
            description: "The operator token KEYHAVEN_ADMIN_TOKEN; without it configured, operator routes answer 403.",
          },
          portalSession: {
            type: "apiKey",
            in: "cookie",
            name: "portal_session",
            description: "A customer portal session's access token (v2 portal.exchangeCode), on the portal routes only.",
          },
        },
        schemas: Object.assign(errorComponents(), ...others.map((part) => part.components)),
      },
    },
    transform: (input) => {
      const method = Array.isArray(input.route.method) ? input.route.method[0] : input.route.method;
      const rpc = byRoute.get(`${method} ${input.url}`);
      if (!rpc) {
        for (const part of others) {
          const schema = part.operation(method ?? "", input.url, () => zodTransform(input).schema as Record<string, unknown>);
          if (schema) return { url: input.url, schema };
        }
        // Only the RPCs are the API; /docs, /metrics and the error pages are not part of it.
        return { schema: { hide: true }, url: input.url };
      }
      const transformed = zodTransform(input);
      const schema = transformed.schema as Record<string, unknown> & { response?: Record<string, unknown> };
      const response: Record<string, unknown> = { ...schema.response };
      const success = String(rpc.status ?? 200);
      // @fastify/swagger takes a response's description from this key (and drops it from the schema).
      response[success] = { ...(response[success] as Record<string, unknown>), "x-response-description": rpc.returns };
      for (const status of errorStatusesOf(rpc)) response[status] = errorResponse(status, rpc);
      return {
        url: transformed.url,
        schema: {
          ...schema,
          operationId: operationName(rpc),
          summary: operationName(rpc),
          description: rpc.summary,
          tags: [serviceOf(rpc)],
          security: securityOf(rpc),
          response,
        },
      };
    },
  });

  app.get("/openapi.json", { schema: { hide: true } }, async (_req, reply) => reply.send(app.swagger()));

  await app.register(scalar, {
    routePrefix: "/docs",
    logLevel: "warn",
    configuration: {
      url: "/openapi.json",
      pageTitle: "keyhaven API reference",
      // Air-gapped installs: nothing may be fetched from elsewhere (fonts, telemetry, the hosted client or agent).
      withDefaultFonts: false,
      telemetry: false,
      hideClientButton: true,
      showDeveloperTools: "never",
      agent: { disabled: true },
      mcp: { disabled: true },
      // Every operation is listed in the sidebar by its RPC name, as in the route table of docs/api.md.
      defaultOpenAllTags: true,
    },
  });
}
