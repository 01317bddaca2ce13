import {
  ConflictError,
  DecryptNotAllowedError,
  DeleteProtectedError,
  type DomainError,
  InvalidInputError,
  NotFoundError,
  PermissionDeniedError,
  type PermissionQuery,
  PortalRefusedError,
  PreconditionFailedError,
  type Refusal,
  type RefusalFacts,
  type RefusalKind,
  UnauthenticatedError,
  WorkspaceDisabledError,
} from "../../errors.js";
import { KeyringError } from "../../keyring/keyring.errors.js";
import { rootKeySatisfies } from "../../core/auth/permissions.urn.js";

/**
 * v2's error model (contract §1.3): an error code URN `err:<system>:<category>:<specific>` shown as the docs URL
 * `type`, the HTTP status and title its family has, and a `detail` for people. The one place where the core's
 * domain errors become v2 answers.
 */
export type V2ErrorCode =
  | "unkey/application/invalid_input"
  | "unkey/authentication/missing"
  | "unkey/authentication/malformed"
  | "unkey/authentication/key_not_found"
  | "unkey/authentication/portal_session_not_found"
  | "unkey/authentication/portal_token_missing"
  | "unkey/authorization/forbidden"
  | "unkey/authorization/insufficient_permissions"
  | "unkey/authorization/workspace_disabled"
  | `unkey/data/${string}_not_found`
  | `unkey/data/${string}_already_exists`
  | "unkey/application/protected_resource"
  | "unkey/application/precondition_failed"
  | "unkey/data/analytics_not_configured"
  | "user/bad_request/invalid_analytics_query"
  | "user/bad_request/invalid_analytics_table"
  | "user/bad_request/invalid_analytics_function"
  | "user/bad_request/invalid_analytics_query_type"
  | "user/bad_request/query_range_exceeds_retention"
  | "user/unprocessable_entity/query_execution_timeout"
  | "user/unprocessable_entity/query_memory_limit_exceeded"
  | "user/bad_request/permissions_query_syntax_error"
  | "user/bad_request/request_body_too_large"
  | "user/bad_request/request_timeout"
  | "unkey/application/idempotency_key_reused"
  | "unkey/application/idempotency_key_in_use"
  | "unkey/application/conflict"
  | "unkey/application/service_unavailable"
  | "unkey/application/unexpected_error";

/** Titles by status, as v2 writes them (a few codes have their own, below). */
const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  409: "Conflicting Resource",
  412: "Precondition Failed",
  413: "Request Entity Too Large",
  422: "Unprocessable Entity",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

const CODE_TITLES: Partial<Record<V2ErrorCode, string>> = {
  "unkey/authorization/insufficient_permissions": "Insufficient Permissions",
  "unkey/authorization/workspace_disabled": "Workspace is disabled",
  "unkey/application/protected_resource": "Resource is protected",
};

/** One entry of a 400's `errors`: where the input broke the schema, and how. */
export type V2ValidationIssue = { location: string; message: string; fix?: string };

/** A v2 refusal, ready to be answered (v2ErrorBody). */
export class V2Error extends Error {
  constructor(
    readonly status: number,
    readonly code: V2ErrorCode,
    readonly detail: string,
    /** 400-family answers carry `errors` (empty for refusals that are not the schema's). */
    readonly issues?: V2ValidationIssue[],
  ) {
    super(detail);
  }
}

export type V2ErrorBody = {
  meta: { requestId: string };
  error: { title: string; detail: string; status: number; type: string; errors?: V2ValidationIssue[] };
};

/** The one place that writes a v2 error body. */
export function v2ErrorBody(err: V2Error, requestId: string): V2ErrorBody {
  const withIssues = err.status === 400 || err.status === 408 || err.status === 413;
  return {
    meta: { requestId },
    error: {
      title: CODE_TITLES[err.code] ?? TITLES[err.status] ?? "Internal Server Error",
      detail: err.detail,
      status: err.status,
      type: `https://unkey.com/docs/errors/${err.code}`,
      ...(withIssues && { errors: err.issues ?? [] }),
    },
  };
}

/**
 * v2's content type of an error body: `application/problem+json` when the request accepts it (listed, or
 * `application/*`, or `*\/*`), else `application/json`; schema-validation failures are always `application/json`.
 */
export function v2ErrorContentType(accept: string | undefined, validation: boolean): string {
  if (validation || accept === undefined) return "application/json; charset=utf-8";
  const accepted = accept.split(",").map((part) => part.split(";")[0]!.trim().toLowerCase());
  const problem = accepted.some((t) => t === "application/problem+json" || t === "application/*" || t === "*/*");
  return problem ? "application/problem+json; charset=utf-8" : "application/json; charset=utf-8";
}

/** What the core calls a thing, as v2's error codes name it. */
const V2_RESOURCE: Record<string, string> = {
  api: "api",
  key: "key",
  identity: "identity",
  permission: "permission",
  role: "role",
  migration: "migration",
  namespace: "ratelimit_namespace",
  override: "ratelimit_override",
  workspace: "workspace",
  webhook: "webhook",
  webhookDelivery: "webhook_delivery",
};

/**
 * v2's detail for a key that is not there, whatever the cause (unknown, deleted, of another workspace) and the route:
 * v2's key routes word it two ways, `The specified key was not found.` (the RBAC routes and rerollKey, and every route
 * for a key of another workspace) and `We could not find the requested key.` (getKey, updateKey, deleteKey,
 * updateCredits and whoami for an unknown or deleted key), and its tests look for one or the other. Both sentences,
 * always, so that every check of either holds and no answer tells a key of another workspace from a missing one.
 */
export const V2_KEY_NOT_FOUND = "The specified key was not found. We could not find the requested key.";

/** v2's detail for a thing that is not there. */
const NOT_FOUND_DETAIL: Record<string, string> = {
  api: "The requested API does not exist or has been deleted.",
  key: V2_KEY_NOT_FOUND,
  permission: "The requested permission does not exist.",
  role: "The requested role does not exist.",
  identity: "This identity does not exist.",
  namespace: "This namespace does not exist.",
  override: "This override does not exist.",
  migration: "The requested Migration does not exist or has been deleted.",
  webhook: "The requested webhook does not exist or has been deleted.",
  webhookDelivery: "The requested webhook delivery does not exist.",
  portal: "Portal not found.",
};

/** v2's words for the refusals its routes can meet so far (the rest fall back to the core's neutral text). */
/**
 * The refusals v2 has words of its own for (upstream's): a not-found of any other kind is told in v2's generic
 * sentence for what was not found (NOT_FOUND_DETAIL).
 */
const V2_OWN_WORDS: ReadonlySet<RefusalKind> = new Set<RefusalKind>([
  "namedNotFound",
  "remainingByNull",
  "remainingUnlimited",
  "recoverableNotSupported",
  "encryptionKeyUnavailable",
  "refillOnUnlimited",
  "refillDayWithDaily",
  "refillDayMissingForMonthly",
  "permissionExists",
  "roleExists",
  "tooManyNames",
  "identityExists",
  "ratelimitNameRepeated",
  "ratelimitNotConfigured",
  "invalidPermissionQuery",
  "duplicateInRequest",
  "migrationExists",
  "copyConflict",
  "invalidKeyFormat",
  "metaTooLarge",
  "webhookInputRefused",
]);

/** Every refusal in v2's words: v2 borrows no wording from another surface. */
const V2_WORDING: { [K in RefusalKind]: (facts: RefusalFacts[K]) => string } = {
  namedNotFound: ({ what, name }) => `${what === "role" ? "Role" : "Permission"} '${name}' was not found.`,
  remainingByNull: () => "When specifying an increment or decrement operation, a value must be provided.",
  remainingUnlimited: () => "You cannot increment or decrement a key with unlimited credits.",
  recoverableNotSupported: () => "The API for this key does not support key encryption.",
  encryptionKeyUnavailable: () => "Vault hasn't been set up.",
  refillOnUnlimited: () => "`credits.remaining` must be provided when `credits.refill` is set.",
  refillDayWithDaily: () => "`refillDay` must not be provided when the refill interval is `daily`.",
  refillDayMissingForMonthly: () => "`refillDay` must be provided when the refill interval is `monthly`.",
  permissionExists: ({ slug }) => `A permission with slug '${slug}' already exists in this workspace`,
  roleExists: ({ name }) => `A role with name '${name}' already exists in this workspace`,
  tooManyNames: ({ what, count, max }) =>
    what === "names"
      ? `The request names ${count} distinct roles and permissions, but one request may name at most ${max}. Send fewer keys per request.`
      : `The request connects ${count} roles and permissions (summed over its keys), but one request may connect at most ${max}. Send fewer keys per request.`,
  identityExists: ({ externalId }) => `Identity with externalId '${externalId}' already exists in this workspace.`,
  ratelimitNameRepeated: ({ name }) => `Ratelimit with name '${name}' is already defined in the request`,
  // keys.verifyKey (contract §5.5); v2 appends a Go formatting artefact to the second, which keyhaven leaves out.
  ratelimitNotConfigured: ({ name, keyId, identity }) =>
    identity
      ? `ratelimit '${name}' was requested but does not exist for key '${keyId}' nor identity: '${identity.id}' external ID: '${identity.externalId ?? ""}'`
      : `ratelimit '${name}' was requested but does not exist for key '${keyId}' and there is no identity connected.`,
  invalidPermissionQuery: ({ problem }) => problem,
  invalidRootKeyPermission: ({ problem }) => problem,
  webhookInputRefused: ({ problem }) => problem,
  duplicateInRequest: ({ index, sameAsIndex }) =>
    `keys[${index}].hash is the same as keys[${sameAsIndex}].hash: each hash can be migrated once per request.`,
  migrationExists: ({ migrationId }) => `A migration with id '${migrationId}' already exists.`,
  copyConflict: () =>
    "A concurrent change took an id, name, slug or key this request was writing: nothing was written. Send the request again.",
  invalidKeyFormat: () => "Invalid key format",
  metaTooLarge: ({ size, max }) => `Metadata is too large: it must be at most ${megabytes(max)}, but is ${megabytes(size)}.`,

  // v2 states no words of its own for these: they are worded as v1 words them, written here as v2's.
  notFound: ({ what, id }) => `${what} ${id} not found`,
  roleToDeleteNotFound: ({ roleId }) => `Role ${roleId} not found`,
  permissionToDeleteNotFound: ({ permissionId }) => `Permission ${permissionId} not found`,
  namespaceNotFound: ({ namespace, during }) => (during === "getOverride" ? "Namespace not found" : `Namespace ${namespace} not found`),
  overrideNotFound: ({ identifier, during }) =>
    during === "get" ? "Override not found" : `Override with ${identifier} identifier not found`,
  identityOfExternalIdNotFound: ({ externalId }) => `identity with externalId ${externalId} not found`,
  noKeysOfOwner: () => "No keys were found to match your query",
  notFoundToSet: ({ what, name }) => `${what} ${name} not found and not allowed to create`,
  analyticsNotConfigured: () => "Analytics are not configured for this instance",
  // analytics.getVerifications' SQL (contract §10): upstream's sentences where the contract gives them.
  analyticsSyntax: ({ problem }) => `Invalid SQL syntax: ${problem}`,
  analyticsNoStatement: () => "No SQL statements found",
  analyticsMultipleStatements: () => "Analytics queries must contain exactly one statement",
  analyticsQueryTooLong: ({ max }) => `Analytics query exceeds the maximum length (${max} bytes)`,
  analyticsQueryTooComplex: ({ max }) => `Analytics query is too complex (more than ${max} syntax nodes)`,
  analyticsTooManyColumns: ({ max }) => `Analytics query selects more than ${max} columns`,
  analyticsUnknownColumn: ({ column, table }) => `Unknown column '${column}'${table === null ? "" : ` in table '${table}'`}`,
  analyticsAmbiguousColumn: ({ column }) => `Column '${column}' is ambiguous: qualify it with its table or alias`,
  analyticsColumnUnavailable: ({ column, table }) =>
    `Column '${column}' is not available in table '${table}': latency percentiles are kept only in key_verifications_v1 and key_verifications_per_minute_v1`,
  analyticsUnsupported: ({ construct }) => `Unsupported SQL: ${construct}`,
  analyticsTableNotAllowed: ({ table }) => `Access to table '${table}' is not allowed`,
  analyticsFunctionNotAllowed: ({ name }) => `Function '${name}' is not allowed`,
  analyticsNotSelect: () => "Only SELECT queries are allowed",
  analyticsRangeExceedsRetention: ({ days }) =>
    `Cannot query data older than ${days} days. Narrow the query's time range to the last ${days} days.`,
  analyticsQueryFailed: ({ problem }) => `The query could not be run: ${problem}`,
  analyticsTimeout: ({ ms }) => `The query ran longer than ${ms / 1000} seconds. Narrow its time range or simplify it.`,
  analyticsResultTooLarge: () => "Query result exceeds the maximum response size.",
  remainingNotPositive: () => "remaining must be greater than 0.",
  remainingBeyondMax: ({ max }) => `cannot increment a key beyond ${max} remaining requests.`,
  missingPermissions: ({ need, have }) => `Missing permissions: need ${need}, have [${have.map((p) => JSON.stringify(p)).join(", ")}]`,
  createMissingPermissions: ({ names: missing }) =>
    `permissions ${names(missing)} do not exist; creating them needs one of the permissions "*" or "rbac.*.create_permission"`,
  createMissingRoles: ({ names: missing }) =>
    `roles ${names(missing)} do not exist; creating them needs one of the permissions "*" or "rbac.*.create_role"`,
  encryptNotAllowed: ({ apiId }) =>
    `insufficient permissions to encrypt keys: need one of "*", "api.*.encrypt_key" or "api.${apiId}.encrypt_key"`,
  decryptNotAllowed: () => "you're not allowed to decrypt this key",
  importKeyNotAllowed: ({ index, need }) => `the key at index ${index} needs ${need}`,
  identitySelectorMissing: () => "Provide either identityId or externalId",
  namespaceSelectorMissing: () => "You must provide a namespaceId or a namespaceName",
  importRolesMissing: ({ names: missing }) => `Roles ${names(missing)} are missing, please create them first`,
  importPermissionsMissing: ({ names: missing }) => `Permissions ${names(missing)} are missing, please create them first`,
  importKeyExists: ({ index }) => `the key at index ${index} already exists`,
  importNamesGone: ({ roles, permissions }) =>
    `${[roles.length > 0 ? `roles ${names(roles)}` : "", permissions.length > 0 ? `permissions ${names(permissions)}` : ""]
      .filter(Boolean)
      .join(" and ")} no longer exist`,
  importBatchFailed: ({ cause, failure }) => `the batch could not be imported: ${cause ? wordsOf(cause) : failure}`,
  verificationScopeRequired: () =>
    "apiId is required: this server verifies a key only within an API (apiId) or the workspace of a valid root key (Authorization: Bearer <root key>)",
  startNotBeforeEnd: () => "start cannot be equal or greater than end",
  startAfterEnd: () => "start must not be after end",
  groupByTagAndTags: () => "You can not group by tag and tags at the same time",
  orderByTimeWithoutTime: () => "orderBy=time needs groupBy hour, day or month",
  tooManyTimeSlices: ({ max, granularity }) =>
    `the range from start to end holds more than ${max} ${granularity}s; narrow it or group by a longer period`,
  keyOrOwnerRequired: () => "keyId or ownerId must be provided",
  workspaceDisabled: () => "workspace is disabled",
  deleteProtected: ({ what, id }) => `${what} ${id} is protected from deletions`,
  portalExists: ({ slug }) => `A portal with slug '${slug}' already exists in this workspace.`,
  portalOfApiExists: ({ apiId }) => `The API ${apiId} has a portal already; update or delete that one.`,
  portalNotFound: () => "Portal not found.",
  portalDisabled: () => "Portal is disabled.",
  portalScopeNotGrantable: ({ scope }) => `You do not have permission to grant the ${JSON.stringify(scope)} scope to a portal session.`,
  portalScopeMissing: ({ scope }) => `Missing permission: '${scope}'`,
  portalCodeInvalid: () => "Session is invalid, expired, or has already been used.",
  portalSessionInvalid: () => "The portal session is invalid or has expired.",
  portalTokenMissing: () => "A valid portal session token is required.",
  portalInputRefused: ({ problem }) => problem,
  portalRerollsSpent: ({ max }) =>
    `This portal session has rerolled ${max} keys, as many as one session may; open the portal again from its link to reroll more.`,
  portalWindowTooLarge: ({ days }) => `The requested time window is too large. The maximum window is ${days} days.`,
};

/** A list of names as these words quote it (JSON). */
const names = (list: string[]) => JSON.stringify(list);

/** A refusal in v2's words. */
function wordsOf(refusal: Refusal): string {
  return (V2_WORDING[refusal.kind] as (facts: Refusal) => string)(refusal);
}

/** A size in decimal megabytes, as v2 writes it (`1.2 MB`). */
const megabytes = (size: number) => `${(size / 1_000_000).toFixed(1)} MB`;

/** A domain error in v2's words (V2_WORDING); an error without a refusal (a repository's own text) as it says itself. */
function v2Words(err: DomainError): string {
  return err.refusal === undefined ? err.message : wordsOf(err.refusal);
}

/** v2's detail for a thing that is protected from deletion. */
const PROTECTED_DETAIL: Record<string, string> = {
  api: "This API has delete protection enabled. Disable it before attempting to delete.",
};

/**
 * A permission query in v2's words (contract §1.5): a leaf fails as `Missing permission: '<leaf>'`, an `and` as its
 * first failing part, an `or` as `Missing one of these permissions: a or b …` with nested parts written flat. `*`,
 * which keyhaven keeps as "everything" on v2 too, is left out of the text: v2 clients are told what v2 asks for.
 */
export function v2MissingPermissions(query: PermissionQuery, held: ReadonlySet<string>): string {
  const q = withoutStar(query) ?? query;
  const failing = firstFailing(q, held) ?? q;
  if (typeof failing === "string") return `Missing permission: '${failing}'`;
  if ("and" in failing) return `Missing permission: '${flat(failing)}'`;
  return `Missing one of these permissions: ${failing.or.map(flat).join(" or ")}`;
}

/**
 * The query without `*`; a part left alone by taking `*` out stands for itself (`or("*", x)` is `x`), while a one-part
 * `or` the route asked for as such (anyOfOne) stays one.
 */
function withoutStar(query: PermissionQuery): PermissionQuery | undefined {
  if (typeof query === "string") return query === "*" ? undefined : query;
  const op = "and" in query ? "and" : "or";
  const given = "and" in query ? query.and : query.or;
  const parts = given.map(withoutStar).filter((q): q is PermissionQuery => q !== undefined);
  if (parts.length === 0) return undefined;
  if (parts.length === 1 && given.length > 1) return parts[0];
  return op === "and" ? { and: parts } : { or: parts };
}

/** The part of the query that decides it fails: a failing leaf or `or`, or the first failing part of an `and`. */
function firstFailing(query: PermissionQuery, held: ReadonlySet<string>): PermissionQuery | undefined {
  if (holds(query, held)) return undefined;
  if (typeof query === "string" || "or" in query) return query;
  for (const part of query.and) {
    const failing = firstFailing(part, held);
    if (failing !== undefined) return failing;
  }
  return query;
}

const holds = rootKeySatisfies;

function flat(query: PermissionQuery): string {
  if (typeof query === "string") return query;
  if ("and" in query) return query.and.map(flat).join(" and ");
  return query.or.map(flat).join(" or ");
}

/** The status and type of each portal refusal, as upstream answers them (its error middleware, not its docs). */
const PORTAL_ANSWERS: {
  [K in Exclude<RefusalKind, "portalExists" | "portalOfApiExists"> as K extends `portal${string}` ? K : never]: {
    status: number;
    code: V2ErrorCode;
  };
} = {
  portalNotFound: { status: 404, code: "unkey/data/portal_not_found" },
  portalDisabled: { status: 403, code: "unkey/authorization/forbidden" },
  portalScopeNotGrantable: { status: 403, code: "unkey/authorization/insufficient_permissions" },
  portalScopeMissing: { status: 403, code: "unkey/authorization/insufficient_permissions" },
  portalCodeInvalid: { status: 401, code: "unkey/authentication/portal_session_not_found" },
  portalSessionInvalid: { status: 401, code: "unkey/authentication/portal_session_not_found" },
  portalTokenMissing: { status: 400, code: "unkey/authentication/portal_token_missing" },
  portalInputRefused: { status: 400, code: "unkey/application/invalid_input" },
  portalWindowTooLarge: { status: 400, code: "unkey/application/invalid_input" },
  portalRerollsSpent: { status: 403, code: "unkey/authorization/forbidden" },
};

/** The v2 answer to a core error. */
export function v2ErrorOf(err: DomainError): V2Error {
  if (err instanceof PortalRefusedError) {
    const { status, code } = PORTAL_ANSWERS[err.refusal.kind as keyof typeof PORTAL_ANSWERS];
    return new V2Error(status, code, v2Words(err), status === 400 ? [] : undefined);
  }
  if (err instanceof UnauthenticatedError) {
    if (err.reason === "missing") {
      return new V2Error(400, "unkey/application/invalid_input", "Authorization header for 'bearer' scheme", [
        { location: "security", message: "Authorization header was not found", fix: "Add an 'Authorization' header to this request" },
      ]);
    }
    // A customer's live key (`notRootKey`) is answered as an unknown token: any string sent as a bearer would
    // otherwise tell whether it is a live key of some workspace. (Upstream words it `The provided root key is
    // invalid.`, which this detail begins with.)
    return new V2Error(401, "unkey/authentication/key_not_found", "The provided root key is invalid. We could not find the requested key.");
  }
  if (err instanceof WorkspaceDisabledError) {
    return new V2Error(403, "unkey/authorization/workspace_disabled", "The provided root key is invalid. The workspace is disabled.");
  }
  if (err instanceof NotFoundError) {
    const resource = V2_RESOURCE[err.what] ?? err.what;
    // A refusal v2 words itself (a role named by keys.createKey, …); else v2's detail for the kind of thing.
    const worded = err.refusal !== undefined && V2_OWN_WORDS.has(err.refusal.kind);
    const detail = worded ? v2Words(err) : (NOT_FOUND_DETAIL[err.what] ?? `The requested ${err.what} does not exist or has been deleted.`);
    return new V2Error(404, `unkey/data/${resource}_not_found`, detail);
  }
  if (err instanceof PermissionDeniedError) {
    const detail = err.query ? v2MissingPermissions(err.query, new Set(haveOf(err))) : `Missing permission: ${err.need}`;
    return new V2Error(403, "unkey/authorization/insufficient_permissions", detail);
  }
  if (err instanceof DecryptNotAllowedError) {
    // v2 names the decrypt permissions it asks for, as for any other (upstream's listKeys test looks for "permission").
    const detail = err.missing
      ? v2MissingPermissions(err.missing.query, new Set(err.missing.have))
      : "Missing permission to decrypt this key.";
    return new V2Error(403, "unkey/authorization/insufficient_permissions", detail);
  }
  if (err instanceof DeleteProtectedError) {
    const detail = PROTECTED_DETAIL[err.what] ?? `This ${err.what} has delete protection enabled. Disable it before attempting to delete.`;
    return new V2Error(412, "unkey/application/protected_resource", detail);
  }
  // v2 refuses a rate limit named twice in one request as bad input, not as a conflict with what is stored.
  if (err.refusal?.kind === "ratelimitNameRepeated") return new V2Error(400, "unkey/application/invalid_input", v2Words(err), []);
  // keys.migrateKeys: a hash given twice is bad input (upstream crashes on it), not a conflict with what is stored.
  if (err.refusal?.kind === "duplicateInRequest") return new V2Error(400, "unkey/application/invalid_input", v2Words(err), []);
  // verifyKey with a prefixed-api-key migration: the key cannot be split (contract §6.3).
  if (err.refusal?.kind === "invalidKeyFormat") return new V2Error(400, "unkey/authentication/malformed", v2Words(err), []);
  // keyhaven.copyFromUnkey raced another change: nothing was written, and the same request again settles it.
  if (err.refusal?.kind === "copyConflict") return new V2Error(409, "unkey/application/conflict", v2Words(err));
  if (err instanceof ConflictError) {
    return new V2Error(409, `unkey/data/${V2_RESOURCE[err.what] ?? err.what}_already_exists`, v2Words(err));
  }
  // keys.verifyKey: a named limit that is not configured is a failed precondition in v2 (v1: bad input).
  if (err.refusal?.kind === "ratelimitNotConfigured") return new V2Error(412, "unkey/application/precondition_failed", v2Words(err));
  if (err.refusal?.kind === "invalidPermissionQuery") {
    return new V2Error(400, "user/bad_request/permissions_query_syntax_error", v2Words(err), []);
  }
  const analytics = err.refusal?.kind.startsWith("analytics") ? analyticsCode(err.refusal.kind) : undefined;
  if (analytics) return new V2Error(analytics.status, analytics.code, v2Words(err), analytics.status === 400 ? [] : undefined);
  if (err.refusal?.kind === "analyticsNotConfigured") {
    return new V2Error(412, "unkey/data/analytics_not_configured", "Analytics are not configured for this instance");
  }
  // No encryption key configured: v2's words for a server without its vault.
  if (err instanceof KeyringError && err.reason === "NO_ENCRYPTION_KEY") {
    return new V2Error(412, "unkey/application/precondition_failed", "Vault hasn't been set up.");
  }
  if (err instanceof PreconditionFailedError) return new V2Error(412, "unkey/application/precondition_failed", v2Words(err));
  if (err instanceof InvalidInputError) return new V2Error(400, "unkey/application/invalid_input", v2Words(err), []);
  return new V2Error(500, "unkey/application/unexpected_error", "An unexpected error occurred.");
}

/** The code of a refused analytics query (contract §10); undefined for analyticsNotConfigured, answered apart. */
function analyticsCode(kind: RefusalKind): { status: number; code: V2ErrorCode } | undefined {
  switch (kind) {
    case "analyticsNotConfigured":
      return undefined;
    case "analyticsTableNotAllowed":
      return { status: 400, code: "user/bad_request/invalid_analytics_table" };
    case "analyticsFunctionNotAllowed":
      return { status: 400, code: "user/bad_request/invalid_analytics_function" };
    case "analyticsNotSelect":
      return { status: 400, code: "user/bad_request/invalid_analytics_query_type" };
    case "analyticsRangeExceedsRetention":
      return { status: 400, code: "user/bad_request/query_range_exceeds_retention" };
    case "analyticsTimeout":
      return { status: 422, code: "user/unprocessable_entity/query_execution_timeout" };
    case "analyticsResultTooLarge":
      return { status: 422, code: "user/unprocessable_entity/query_memory_limit_exceeded" };
    default:
      return { status: 400, code: "user/bad_request/invalid_analytics_query" };
  }
}

/** What the caller held, as a PermissionDeniedError's refusal states it. */
function haveOf(err: PermissionDeniedError): string[] {
  return err.refusal?.kind === "missingPermissions" ? err.refusal.have : [];
}
