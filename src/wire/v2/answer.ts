import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from "fastify-type-provider-zod";
import { DomainError } from "../../errors.js";
import { ApiError } from "../../http/errors.js";
import { findDependencyFailure } from "../../storage/dependency.js";
import { V2Error, type V2ValidationIssue, v2ErrorBody, v2ErrorContentType, v2ErrorOf } from "./errors.js";

/**
 * A body that fails the route's schema, as v2 answers it (contract §1.3): always 400 and `application/json`,
 * `detail` naming the route, `errors` with the first problem's JSON-schema keyword location and a message in the words
 * of v2's validator (santhosh-tekuri/jsonschema: `minLength: got 2, want 3`, `missing property 'name'`, …). A check of
 * keyhaven's own (a refinement) keeps its message, after the field's path.
 */
function validationError(err: FastifyError, path: string, body: unknown, namedPaths: boolean): V2Error {
  const first = err.validation?.[0];
  const issues: V2ValidationIssue[] = [];
  let detail = `POST request body for '${path}' failed to validate schema`;
  if (first) {
    const steps = first.instancePath.split("/").filter(Boolean);
    const words = v2IssueWords(first.keyword, (first.params ?? {}) as IssueParams, steps, body);
    const { keyword, message } = words ?? {
      keyword: first.keyword,
      message: `${steps.join(".") || "body"}: ${first.message ?? "invalid input"}`,
    };
    // A missing property is the parent's `required`; every other keyword is the field's own.
    const at = keyword === "required" ? steps.slice(0, -1) : steps;
    issues.push({ location: `${schemaPathOf(at, body)}/${keyword}`, message });
    // A bulk route's client needs the item, which the schema path leaves out: `keys[3].credits.refill.amount: …`.
    if (namedPaths) detail = `${fieldPathOf(steps, body) || "body"}: ${words?.message ?? first.message ?? "invalid input"}`;
  }
  return new V2Error(400, "unkey/application/invalid_input", detail, issues);
}

/** A field of the body as a person names it: `keys[3].credits.refill.amount`. */
function fieldPathOf(steps: string[], body: unknown): string {
  let at: unknown = body;
  let path = "";
  for (const step of steps) {
    path += Array.isArray(at) && /^\d+$/.test(step) ? `[${step}]` : path === "" ? step : `.${step}`;
    at = at !== null && typeof at === "object" ? (at as Record<string, unknown>)[step] : undefined;
  }
  return path;
}

/** What fastify-type-provider-zod keeps of a zod issue (all but its code, path and message). */
type IssueParams = {
  origin?: string;
  minimum?: number | bigint;
  maximum?: number | bigint;
  inclusive?: boolean;
  expected?: string;
  keys?: string[];
  values?: unknown[];
  format?: string;
  pattern?: string;
  divisor?: number;
};

/** The JSON-schema path of a field of the body: `/properties/<name>` per step, `/items` for an array's element. */
function schemaPathOf(steps: string[], body: unknown): string {
  let at: unknown = body;
  let path = "";
  for (const step of steps) {
    path += Array.isArray(at) && /^\d+$/.test(step) ? "/items" : `/properties/${step}`;
    at = at !== null && typeof at === "object" ? (at as Record<string, unknown>)[step] : undefined;
  }
  return path;
}

function valueAt(body: unknown, steps: string[]): unknown {
  let at = body;
  for (const step of steps) at = at !== null && typeof at === "object" ? (at as Record<string, unknown>)[step] : undefined;
  return at;
}

/** A JSON value's type, as v2's validator names it. */
function jsonTypeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value === "object" ? "object" : typeof value;
}

/** zod's names of the types it expected, as JSON schema's. */
const JSON_TYPES: Record<string, string> = { int: "integer", record: "object", tuple: "array", bigint: "integer" };

/** A string quoted as v2's validator quotes it (`'…'`). */
const quoted = (text: string) => `'${JSON.stringify(text).slice(1, -1).replaceAll('\\"', '"').replaceAll("'", "\\'")}'`;

/** A value as v2's validator shows a primitive (strings quoted). */
const shown = (value: unknown) => (typeof value === "string" ? quoted(value) : goNumber(value));

/**
 * A number as Go's `%v` writes a float64 (v2's validator formats bounds so): the shortest digits, in exponent form
 * (`2.592e+09`) from an exponent of 6 on or below -4.
 */
export function goNumber(value: unknown): string {
  if (typeof value === "bigint") value = Number(value);
  if (typeof value !== "number" || !Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  const [mantissa, exp] = value.toExponential().split("e") as [string, string];
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 6) return `${mantissa}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  return String(value);
}

/**
 * A zod issue as the JSON-schema keyword v2's validator reports it and its message; undefined for checks JSON schema
 * has no keyword for (refinements), which keep zod's message.
 */
function v2IssueWords(code: string, p: IssueParams, steps: string[], body: unknown): { keyword: string; message: string } | undefined {
  const value = valueAt(body, steps);
  switch (code) {
    case "invalid_type":
      if (value === undefined) return { keyword: "required", message: `missing property ${quoted(steps.at(-1) ?? "")}` };
      return { keyword: "type", message: `got ${jsonTypeOf(value)}, want ${JSON_TYPES[p.expected ?? ""] ?? p.expected}` };
    case "too_small":
    case "too_big": {
      const small = code === "too_small";
      const want = small ? p.minimum : p.maximum;
      const bound = small ? "min" : "max";
      if (p.origin === "string" && typeof value === "string") {
        // v2's validator counts characters (code points), as a string's length is defined in JSON schema.
        return { keyword: `${bound}Length`, message: `${bound}Length: got ${[...value].length}, want ${goNumber(want)}` };
      }
      if (p.origin === "array" && Array.isArray(value)) {
        return { keyword: `${bound}Items`, message: `${bound}Items: got ${value.length}, want ${goNumber(want)}` };
      }
      if (p.origin === "number" || p.origin === "int" || p.origin === "bigint") {
        const keyword = p.inclusive === false ? (small ? "exclusiveMinimum" : "exclusiveMaximum") : small ? "minimum" : "maximum";
        return { keyword, message: `${keyword}: got ${goNumber(value)}, want ${goNumber(want)}` };
      }
      return undefined;
    }
    case "unrecognized_keys":
      return { keyword: "additionalProperties", message: `additional properties ${(p.keys ?? []).map(quoted).join(", ")} not allowed` };
    case "invalid_format":
      if (p.format === "regex" && typeof value === "string" && p.pattern !== undefined) {
        return {
          keyword: "pattern",
          message: `${quoted(value)} does not match pattern ${quoted(p.pattern.replace(/^\/(.*)\/[a-z]*$/s, "$1"))}`,
        };
      }
      return { keyword: "format", message: `${shown(value)} is not valid ${p.format}` };
    case "invalid_value": {
      const values = p.values ?? [];
      return {
        keyword: "enum",
        message: values.length === 1 ? `value must be ${shown(values[0])}` : `value must be one of ${values.map(shown).join(", ")}`,
      };
    }
    case "invalid_union":
      return { keyword: "oneOf", message: "'oneOf' failed, none matched" };
    case "not_multiple_of":
      return { keyword: "multipleOf", message: `multipleOf: got ${goNumber(value)}, want ${goNumber(p.divisor)}` };
    default:
      return undefined;
  }
}

/** The v2 error every failure of a v2 request becomes. */
function v2ErrorOfAny(err: FastifyError, req: FastifyRequest): { error: V2Error; validation: boolean } {
  const path = req.url.split("?")[0] ?? "";
  if (err instanceof V2Error) return { error: err, validation: false };
  if (err instanceof DomainError) return { error: v2ErrorOf(err), validation: false };
  if (hasZodFastifySchemaValidationErrors(err)) {
    const namedPaths = (req.routeOptions.config as { namedPaths?: boolean } | undefined)?.namedPaths === true;
    return { error: validationError(err, path, req.body, namedPaths), validation: true };
  }
  if (err instanceof ApiError && err.status === 400) {
    // The body parser's refusals (not JSON, a wrong content type): v2's validator answers these as schema failures.
    return {
      error: new V2Error(400, "unkey/application/invalid_input", `POST request body for '${path}' failed to validate schema`, [
        { location: "body", message: err.message },
      ]),
      validation: true,
    };
  }
  if (err.statusCode === 413) {
    const limit = req.routeOptions.bodyLimit ?? 0;
    const detail = `The request body exceeds the maximum allowed size of ${limit} bytes.`;
    return { error: new V2Error(413, "user/bad_request/request_body_too_large", detail, []), validation: false };
  }
  if (!isResponseSerializationError(err) && err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return { error: new V2Error(400, "unkey/application/invalid_input", err.message, []), validation: false };
  }
  const unavailable = findDependencyFailure(err);
  if (unavailable)
    return { error: new V2Error(503, "unkey/application/service_unavailable", unavailable.publicMessage), validation: false };
  req.log.error({ err }, "unhandled error");
  return { error: new V2Error(500, "unkey/application/unexpected_error", "An unexpected error occurred."), validation: false };
}

/** Answers a failed v2 request in v2's error envelope. */
export function answerV2Error(err: FastifyError, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { error, validation } = v2ErrorOfAny(err, req);
  return reply
    .code(error.status)
    .header("content-type", v2ErrorContentType(req.headers.accept, validation))
    .send(JSON.stringify(v2ErrorBody(error, req.id)));
}

/** A v2 path no route serves (v2's own server answers a bare text 404; keyhaven keeps its envelope). */
export function answerV2NotFound(req: FastifyRequest, reply: FastifyReply, allowed: string[]): FastifyReply {
  const path = req.url.split("?")[0] ?? "";
  const error =
    allowed.length > 0
      ? new V2Error(405, "unkey/application/invalid_input", `${req.method} is not allowed on ${path}; use ${allowed.join(" or ")}`)
      : new V2Error(404, "unkey/application/invalid_input", `No route ${req.method} ${path}.`);
  if (allowed.length > 0) reply.header("Allow", allowed.join(", "));
  return reply
    .code(error.status)
    .header("content-type", v2ErrorContentType(req.headers.accept, false))
    .send(JSON.stringify(v2ErrorBody(error, req.id)));
}
