import {
  ConflictError,
  DecryptNotAllowedError,
  DeleteProtectedError,
  type DomainError,
  InvalidInputError,
  NotFoundError,
  PermissionDeniedError,
  PreconditionFailedError,
  type Refusal,
  type RefusalFacts,
  type RefusalKind,
  UnauthenticatedError,
  type UnauthenticatedReason,
  WorkspaceDisabledError,
} from "../../errors.js";
import { ApiError, type ErrorCode } from "../../http/errors.js";

/** v1's words for a caller that is no root key (all 403 UNAUTHORIZED, as v1 clients expect). */
const UNAUTHENTICATED_MESSAGES: Record<UnauthenticatedReason, string> = {
  missing: "key required",
  notRootKey: "root key required",
  unknown: "key not found",
};

const names = (list: string[]) => JSON.stringify(list);

/**
 * v1's text for every refusal of the core, worded from its facts exactly as v1 answered it (clients match on some
 * of these). The one place v1's wording of the core's refusals lives; the core speaks in kinds and facts only.
 */
const V1_WORDING: { [K in RefusalKind]: (facts: RefusalFacts[K]) => string } = {
  notFound: ({ what, id }) => `${what} ${id} not found`,
  roleToDeleteNotFound: ({ roleId }) => `Role ${roleId} not found`,
  permissionToDeleteNotFound: ({ permissionId }) => `Permission ${permissionId} not found`,
  namespaceNotFound: ({ namespace, during }) => (during === "getOverride" ? "Namespace not found" : `Namespace ${namespace} not found`),
  overrideNotFound: ({ identifier, during }) =>
    during === "get" ? "Override not found" : `Override with ${identifier} identifier not found`,
  identityOfExternalIdNotFound: ({ externalId }) => `identity with externalId ${externalId} not found`,
  noKeysOfOwner: () => "No keys were found to match your query",
  notFoundToSet: ({ what, name }) => `${what} ${name} not found and not allowed to create`,
  namedNotFound: ({ what, name }) => `${what} ${name} not found`,
  analyticsNotConfigured: () => "Analytics are not configured for this instance",
  // v2's SQL analytics only (v1 has no route that meets them); worded plainly in case one ever does.
  analyticsSyntax: ({ problem }) => `invalid SQL syntax: ${problem}`,
  analyticsNoStatement: () => "no SQL statement found",
  analyticsMultipleStatements: () => "the query must contain exactly one statement",
  analyticsQueryTooLong: ({ max }) => `the query is longer than ${max} bytes`,
  analyticsQueryTooComplex: ({ max }) => `the query has more than ${max} syntax nodes`,
  analyticsTooManyColumns: ({ max }) => `the query selects more than ${max} columns`,
  analyticsUnknownColumn: ({ column }) => `unknown column ${column}`,
  analyticsAmbiguousColumn: ({ column }) => `ambiguous column ${column}`,
  analyticsColumnUnavailable: ({ column, table }) => `column ${column} is not available in ${table}`,
  analyticsUnsupported: ({ construct }) => `unsupported SQL: ${construct}`,
  analyticsTableNotAllowed: ({ table }) => `table ${table} is not allowed`,
  analyticsFunctionNotAllowed: ({ name }) => `function ${name} is not allowed`,
  analyticsNotSelect: () => "only SELECT queries are allowed",
  analyticsRangeExceedsRetention: ({ days }) => `data older than ${days} days cannot be queried`,
  analyticsQueryFailed: ({ problem }) => `the query could not be run: ${problem}`,
  analyticsTimeout: ({ ms }) => `the query ran longer than ${ms} ms`,
  analyticsResultTooLarge: () => "the query's result is too large",

  remainingNotPositive: () => "remaining must be greater than 0.",
  refillOnUnlimited: ({ during }) =>
    during === "update" ? "Cannot set refill on a key with unlimited requests" : "remaining must be set if you are using refill.",
  refillDayWithDaily: ({ during }) =>
    during === "create" ? "when interval is set to 'daily', 'refillDay' must be null." : "Cannot set 'refillDay' if 'interval' is 'daily'",
  // v1 defaults a monthly refill's day to the 1st; this wording is for completeness.
  refillDayMissingForMonthly: () => "refillDay must be provided when the interval is 'monthly'.",
  recoverableNotSupported: ({ apiId }) => `api ${apiId} does not support recoverable keys`,
  encryptionKeyUnavailable: () =>
    "decrypting keys needs the encryption key they were stored with: set KEYHAVEN_ENCRYPTION_KEY and restart keyhaven",
  remainingUnlimited: ({ op }) => `cannot ${op} a key with unlimited remaining requests, please 'set' a value instead.`,
  remainingByNull: ({ op }) => `cannot ${op} a key by null.`,
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

  metaTooLarge: ({ size }) => `metadata is too large, it must be less than 64k characters when json encoded, got: ${size}`,
  ratelimitNameRepeated: ({ name }) => `Ratelimit with name "${name}" is already defined in the request`,
  identitySelectorMissing: () => "Provide either identityId or externalId",
  identityExists: ({ externalId }) => `Identity with externalId "${externalId}" already exists in this workspace`,

  roleExists: ({ name }) => `Role with name "${name}" already exists in this workspace`,
  permissionExists: ({ name }) => `Permission with name "${name}" already exists in this workspace`,
  tooManyNames: ({ what, count, max }) =>
    what === "names"
      ? `the request names ${count} distinct roles and permissions; one request may name at most ${max}: send fewer keys per request`
      : `the request connects ${count} roles and permissions (summed over its keys); one request may connect at most ${max}: send fewer keys per request`,

  namespaceSelectorMissing: () => "You must provide a namespaceId or a namespaceName",

  importRolesMissing: ({ names: missing }) => `Roles ${names(missing)} are missing, please create them first`,
  importPermissionsMissing: ({ names: missing }) => `Permissions ${names(missing)} are missing, please create them first`,
  duplicateInRequest: ({ index, sameAsIndex }) => `the key at index ${index} is the same key as the one at index ${sameAsIndex}`,
  importKeyExists: ({ index }) => `the key at index ${index} already exists`,
  migrationExists: ({ migrationId }) => `migration ${migrationId} already exists`,
  copyConflict: () => "a concurrent change conflicts with this copy; nothing was written, send it again",
  importNamesGone: ({ roles, permissions }) =>
    `${[roles.length > 0 ? `roles ${names(roles)}` : "", permissions.length > 0 ? `permissions ${names(permissions)}` : ""]
      .filter(Boolean)
      .join(" and ")} no longer exist`,
  importBatchFailed: ({ cause, failure }) => `the batch could not be imported: ${cause ? v1Words(cause) : failure}`,

  verificationScopeRequired: () =>
    "apiId is required: this server verifies a key only within an API (apiId) or the workspace of a valid root key (Authorization: Bearer <root key>)",
  invalidKeyFormat: () => "Invalid key format",
  invalidPermissionQuery: ({ problem }) => problem,
  invalidRootKeyPermission: ({ problem }) => problem,
  webhookInputRefused: ({ problem }) => problem,
  ratelimitNotConfigured: ({ name, keyId, identity }) =>
    identity
      ? `ratelimit "${name}" was requested but does not exist for key "${keyId}" nor identity { id: ${identity.id}, externalId: ${identity.externalId}}`
      : `ratelimit "${name}" was requested but does not exist for key "${keyId}" and there is no identity connected`,

  startNotBeforeEnd: () => "start cannot be equal or greater than end",
  startAfterEnd: () => "start must not be after end",
  groupByTagAndTags: () => "You can not group by tag and tags at the same time",
  orderByTimeWithoutTime: () => "orderBy=time needs groupBy hour, day or month",
  tooManyTimeSlices: ({ max, granularity }) =>
    `the range from start to end holds more than ${max} ${granularity}s; narrow it or group by a longer period`,
  keyOrOwnerRequired: () => "keyId or ownerId must be provided",

  workspaceDisabled: () => "workspace is disabled",
  deleteProtected: ({ what, id }) => `${what} ${id} is protected from deletions`,
  // v1 has no portal routes; these are never answered there.
  portalExists: ({ slug }) => `portal ${slug} exists`,
  portalOfApiExists: ({ apiId }) => `api ${apiId} has a portal`,
  portalNotFound: () => "portal not found",
  portalDisabled: () => "portal is disabled",
  portalScopeNotGrantable: ({ scope }) => `cannot grant the ${scope} scope`,
  portalScopeMissing: ({ scope }) => `missing scope ${scope}`,
  portalCodeInvalid: () => "portal session code is invalid, expired or used",
  portalSessionInvalid: () => "portal session is invalid or has expired",
  portalTokenMissing: () => "portal session token missing",
  portalInputRefused: ({ problem }) => problem,
  portalRerollsSpent: ({ max }) => `portal session rerolled ${max} keys`,
  portalWindowTooLarge: ({ days }) => `window longer than ${days} days`,
};

/**
 * The text v1 shows for a core error: its refusal in v1's words; an error without one (a repository's own text)
 * as it says itself.
 */
export function v1Message(err: DomainError): string {
  return err.refusal === undefined ? err.message : v1Words(err.refusal);
}

/** A refusal in v1's words. */
function v1Words(refusal: Refusal): string {
  const word = V1_WORDING[refusal.kind] as (facts: typeof refusal) => string;
  return word(refusal);
}

/** v1's code for the refusals stored with an enqueued batch's keys (migrations.getMigration's `errors`). */
const STORED_REFUSAL_CODES: Partial<Record<RefusalKind, ErrorCode>> = {
  notFound: "NOT_FOUND",
  importNamesGone: "PRECONDITION_FAILED",
  importKeyExists: "CONFLICT",
};

/**
 * A refusal stored with an enqueued batch, as migrations.getMigration shows it: v1's code and words. Rows stored
 * before refusals were (`refusal` null) show the code and text they were stored with.
 */
export function v1StoredError(row: { code: string; message: string; refusal: Refusal | null }): { code: string; message: string } {
  if (row.refusal === null) return { code: row.code, message: row.message };
  return { code: STORED_REFUSAL_CODES[row.refusal.kind] ?? "INTERNAL_SERVER_ERROR", message: v1Words(row.refusal) };
}

/** The v1 answer to a core error: the one place where domain errors become codes, statuses and v1's wording. */
export function apiErrorOf(err: DomainError): ApiError {
  if (err instanceof NotFoundError) return new ApiError("NOT_FOUND", v1Message(err), err.details);
  if (err instanceof ConflictError) return new ApiError("CONFLICT", v1Message(err), err.details);
  if (err instanceof PreconditionFailedError) return new ApiError("PRECONDITION_FAILED", v1Message(err), err.details);
  if (err instanceof InvalidInputError) return new ApiError("BAD_REQUEST", v1Message(err), err.details);
  // v1 answers a missing decrypt permission with UNAUTHORIZED, not INSUFFICIENT_PERMISSIONS (getKey, listKeys).
  if (err instanceof DecryptNotAllowedError) return new ApiError("UNAUTHORIZED", v1Message(err), err.details);
  // v1 answered creating while adding, and disconnecting while setting, 403 UNAUTHORIZED; any other missing permission
  // 403 INSUFFICIENT_PERMISSIONS.
  if (err instanceof PermissionDeniedError)
    return new ApiError(err.check === undefined ? "INSUFFICIENT_PERMISSIONS" : "UNAUTHORIZED", v1Message(err), err.details);
  if (err instanceof UnauthenticatedError) return new ApiError("UNAUTHORIZED", UNAUTHENTICATED_MESSAGES[err.reason]);
  if (err instanceof WorkspaceDisabledError) return new ApiError("FORBIDDEN", v1Message(err));
  if (err instanceof DeleteProtectedError) return new ApiError("DELETE_PROTECTED", v1Message(err));
  return new ApiError("INTERNAL_SERVER_ERROR", "internal server error");
}
