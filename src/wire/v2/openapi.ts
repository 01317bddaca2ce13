import { z } from "zod";
import { DEFAULT_BODY_LIMIT, type V2Rpc } from "./rpc.js";

/** The v2 error envelope (errors.ts writes it), as the document's `V2Error` component. */
const v2ErrorSchema = z.object({
  meta: z.object({ requestId: z.string().describe("This request's id.") }),
  error: z.object({
    title: z.string().describe("The status's title (`Not Found`, `Insufficient Permissions`, …)."),
    detail: z.string().describe("What went wrong, for people."),
    status: z.number().int().describe("The HTTP status, again."),
    type: z.string().describe("v2's documentation URL of the error code: `https://unkey.com/docs/errors/<system>/<category>/<specific>`."),
    errors: z
      .array(z.object({ location: z.string(), message: z.string(), fix: z.string().optional() }))
      .optional()
      .describe("On 400, 408 and 413: where the body broke the route's schema (empty for other refusals)."),
  }),
});

const V2_STATUS_TEXT: Record<number, string> = {
  400: "Bad request: the body breaks the route's schema (or holds a field it does not know), or no `Authorization` header, or one without `Bearer `.",
  401: "The root key is unknown, or is not a root key.",
  403: "The root key lacks a permission the route needs, or its workspace is disabled.",
  404: "Not found: the resource does not exist, was deleted, or belongs to another workspace.",
  409: "Conflict: the request would create something that already exists.",
  410: "Gone.",
  412: "Precondition failed: the resource is protected, or something the request relies on is missing.",
  413: "The request body is larger than this route's limit.",
  422: "The request was understood but could not be carried out within its bounds (an analytics query's time or answer size).",
  500: "Unexpected error inside keyhaven.",
  503: "PostgreSQL or Redis could not serve the request; the detail names which.",
};

export const V2_ERROR_COMPONENT = "V2Error";

/** Components the v2 operations refer to. */
export function v2Components(): Record<string, Record<string, unknown>> {
  const { $schema: _, ...schema } = z.toJSONSchema(v2ErrorSchema, { target: "draft-2020-12" }) as Record<string, unknown>;
  return { [V2_ERROR_COMPONENT]: { ...schema, description: "The v2 error envelope (RFC 7807 fields under `error`)." } };
}

/** The error statuses a v2 route can answer: those it declares, 413 on POST, and 500. */
export function v2ErrorStatusesOf(rpc: V2Rpc): number[] {
  const statuses = new Set<number>([...rpc.errors, 500]);
  if (rpc.method === "POST") statuses.add(413);
  return [...statuses].sort((a, b) => a - b);
}

const operationName = (rpc: V2Rpc) => rpc.path.slice("/v2/".length);
const serviceOf = (rpc: V2Rpc) => {
  const name = operationName(rpc);
  return name.includes(".") ? name.slice(0, name.indexOf(".")) : "health";
};

/** The document's tag of a v2 route: its service, prefixed so that /docs shows v2 apart from v1. */
export const v2TagOf = (rpc: V2Rpc) => `v2 ${serviceOf(rpc)}`;

/** A v2 route's operation, from what fastify-type-provider-zod's transform made of its schema. */
export function v2Operation(rpc: V2Rpc, schema: Record<string, unknown> & { response?: Record<string, unknown> }) {
  const response: Record<string, unknown> = { ...schema.response };
  response["200"] = { ...(response["200"] as Record<string, unknown>), "x-response-description": rpc.returns };
  for (const status of v2ErrorStatusesOf(rpc)) {
    const text =
      status === 413
        ? `The request body is larger than ${rpc.bodyLimit ?? DEFAULT_BODY_LIMIT} bytes, this route's limit.`
        : V2_STATUS_TEXT[status];
    response[status] = {
      description: text ?? `HTTP ${status}`,
      content: {
        "application/json": { schema: { $ref: `#/components/schemas/${V2_ERROR_COMPONENT}` } },
        ...(status !== 400 && { "application/problem+json": { schema: { $ref: `#/components/schemas/${V2_ERROR_COMPONENT}` } } }),
      },
    };
  }
  return {
    ...schema,
    operationId: `v2.${operationName(rpc)}`,
    summary: `v2 ${operationName(rpc)}`,
    description: rpc.summary,
    tags: [v2TagOf(rpc)],
    security: rpc.auth === "none" ? [] : rpc.auth === "portalSession" ? [{ portalSession: [] }] : [{ rootKey: [] }],
    response,
  };
}

/** What the shared document needs of the v2 adapter. */
export function v2OpenApi(rpcs: readonly V2Rpc[]) {
  const byRoute = new Map(rpcs.map((rpc) => [`${rpc.method} ${rpc.path}`, rpc]));
  return {
    tags: [...new Set(rpcs.map(v2TagOf))].map((name) => ({ name, description: "Unkey v2 (see docs/differences-from-v2.md)." })),
    components: v2Components(),
    operation: (method: string, url: string, schema: () => Record<string, unknown>) => {
      const rpc = byRoute.get(`${method} ${url}`);
      return rpc && v2Operation(rpc, schema());
    },
  };
}
