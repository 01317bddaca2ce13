/**
 * Errors of the core (repositories, planners, workers): what went wrong, in plain fields, with no HTTP status, no
 * error code of a wire protocol, no envelope and no protocol's wording. A wire adapter maps them (v1: apiErrorOf in
 * wire/v1/errors.ts, applied by the error handler in app.ts) and words them from `refusal`, the situation and its
 * facts. `message` is a neutral description for logs; no client is shown it unless an error has no refusal.
 */
export abstract class DomainError extends Error {
  /** Why the core refused, with the facts an adapter words it from (absent: only `message` says it). */
  readonly refusal?: Refusal;

  constructor(
    why: string | Refusal,
    /** Facts a program may read instead of the message (which key of a batch, which names are missing). */
    readonly details?: ErrorDetails,
  ) {
    super(typeof why === "string" ? why : describeRefusal(why));
    if (typeof why !== "string") this.refusal = why;
  }
}

/**
 * Every situation the core refuses in, by kind, with the facts an adapter needs to word it (v1: v1Message in
 * wire/v1/errors.ts). `during` names the operation where a protocol words one situation apart per operation.
 */
export type RefusalFacts = {
  // Something named does not exist (or is not visible to the caller).
  notFound: { what: string; id: string };
  roleToDeleteNotFound: { roleId: string };
  permissionToDeleteNotFound: { permissionId: string };
  namespaceNotFound: { namespace: string; during: "getOverride" | "other" };
  overrideNotFound: { identifier: string; during: "get" | "delete" };
  identityOfExternalIdNotFound: { externalId: string };
  noKeysOfOwner: { ownerId: string };
  /** keys.setRoles / setPermissions naming a role or permission that is missing (and not to be created). */
  notFoundToSet: { what: string; name: string };
  /** v2's key RBAC routes naming a role (or, to remove, a permission) by a name the workspace lacks. */
  namedNotFound: { what: "role" | "permission"; name: string };
  // Keys.
  remainingNotPositive: Record<never, never>;
  refillOnUnlimited: { during: "create" | "import" | "update" };
  refillDayWithDaily: { during: "create" | "update" };
  /** A monthly refill without its day, where the protocol does not default it to the 1st (v2). */
  refillDayMissingForMonthly: Record<never, never>;
  recoverableNotSupported: { apiId: string };
  encryptionKeyUnavailable: Record<never, never>;
  remainingUnlimited: { op: "increment" | "decrement" | "set" };
  remainingByNull: { op: "increment" | "decrement" };
  remainingBeyondMax: { max: number };
  // Permissions the caller lacks, where the operation says more than what it needs.
  missingPermissions: { need: string; have: string[] };
  createMissingPermissions: { names: string[] };
  createMissingRoles: { names: string[] };
  encryptNotAllowed: { apiId: string };
  decryptNotAllowed: { apiId: string };
  importKeyNotAllowed: { index: number; need: string };
  // Identities.
  metaTooLarge: { size: number; max: number };
  ratelimitNameRepeated: { name: string };
  identitySelectorMissing: Record<never, never>;
  identityExists: { externalId: string };
  // Roles and permissions.
  roleExists: { name: string };
  permissionExists: { name: string; slug: string };
  /** A request naming more roles and permissions, or writing more links, than one request may (core/rbac/rbac.bounds.ts). */
  tooManyNames: { what: "names" | "links"; count: number; max: number };
  // Rate limits.
  namespaceSelectorMissing: Record<never, never>;
  // Imports.
  importRolesMissing: { names: string[] };
  importPermissionsMissing: { names: string[] };
  duplicateInRequest: { index: number; sameAsIndex: number };
  /** v2's migrations (key_migrations): an id taken already, by any workspace. */
  migrationExists: { migrationId: string };
  /** keyhaven.copyFromUnkey: a concurrent change took an id, name, slug or key the request was writing; nothing was written. */
  copyConflict: Record<never, never>;
  // An enqueued batch's keys not imported by the worker (stored with the batch, worded when a client reads them).
  importKeyExists: { index: number };
  importNamesGone: { roles: string[]; permissions: string[] };
  /** The batch failed as a whole: from a refusal of the core (`cause`), else only what kind of failure it was. */
  importBatchFailed: { cause?: Refusal; failure?: string };
  // Verification.
  verificationScopeRequired: Record<never, never>;
  /** A key verified with a prefixed-api-key migration that is not `<prefix>_<shortToken>_<longToken>`. */
  invalidKeyFormat: Record<never, never>;
  invalidPermissionQuery: { problem: string };
  /** A root key's permission that no check could ever require (empty, too long, with whitespace), or too many. */
  invalidRootKeyPermission: { problem: string };
  ratelimitNotConfigured: { name: string; keyId: string; identity?: { id: string; externalId: string | null } };
  // Analytics.
  startNotBeforeEnd: Record<never, never>;
  startAfterEnd: Record<never, never>;
  groupByTagAndTags: Record<never, never>;
  orderByTimeWithoutTime: Record<never, never>;
  tooManyTimeSlices: { max: number; granularity: string };
  keyOrOwnerRequired: Record<never, never>;
  /** v2's SQL analytics (analytics.getVerifications) need a ClickHouse backend, which keyhaven does not have. */
  analyticsNotConfigured: Record<never, never>;
  // v2's SQL analytics (core/analytics/analytics.sql.*): the caller's query, refused before or while it runs.
  analyticsSyntax: { problem: string };
  analyticsNoStatement: Record<never, never>;
  analyticsMultipleStatements: Record<never, never>;
  analyticsQueryTooLong: { max: number };
  analyticsQueryTooComplex: { max: number };
  analyticsTooManyColumns: { max: number };
  /** A column no source of the query has (`table`: the one public table it was looked for in, if one). */
  analyticsUnknownColumn: { column: string; table: string | null };
  analyticsAmbiguousColumn: { column: string };
  /** A column upstream's table has but keyhaven's rollup does not keep (latency_p75 / p99 of the hour tables). */
  analyticsColumnUnavailable: { column: string; table: string };
  /** SQL the subset leaves out (a clause, an operator, a form of a function), named. */
  analyticsUnsupported: { construct: string };
  analyticsTableNotAllowed: { table: string };
  analyticsFunctionNotAllowed: { name: string };
  analyticsNotSelect: Record<never, never>;
  analyticsRangeExceedsRetention: { days: number };
  /** The store refused the translated query (a column neither grouped nor aggregated, a type mismatch). */
  analyticsQueryFailed: { problem: string };
  analyticsTimeout: { ms: number };
  analyticsResultTooLarge: { max: number };
  // Webhooks: an endpoint's URL refused (not http(s), too long, a private address…) or its description, `problem`
  // naming the field.
  webhookInputRefused: { problem: string };
  // Customer portals (core/portals): createSession's refusals, the exchange of a code, a portal session's own.
  /** No such portal in the caller's workspace, or (masked as missing) no permission to mint its sessions. */
  portalNotFound: Record<never, never>;
  portalDisabled: Record<never, never>;
  /** The root key may not grant `scope` on every API of the portal (its ceiling at mint time). */
  portalScopeNotGrantable: { scope: string };
  /** The portal session was not granted `scope`. */
  portalScopeMissing: { scope: string };
  /** An exchange code unknown, expired or already used. */
  portalCodeInvalid: Record<never, never>;
  /** A portal session token unknown, expired, revoked, or of a session that has ended. */
  portalSessionInvalid: Record<never, never>;
  /** A portal_session cookie sent empty. */
  portalTokenMissing: Record<never, never>;
  /** A portal's slug, name, URL or branding refused, `problem` naming the field. */
  portalInputRefused: { problem: string };
  /** A portal's slug taken in the workspace, or its API has a portal already. */
  portalExists: { slug: string };
  portalOfApiExists: { apiId: string };
  /** A portal session that has rerolled as many keys as one session may. */
  portalRerollsSpent: { max: number };
  /** getVerifications' window longer than a portal may read. */
  portalWindowTooLarge: { days: number };
  // The workspace, deletion protection.
  workspaceDisabled: Record<never, never>;
  deleteProtected: { what: string; id: string };
};

/** A refusal's kind. */
export type RefusalKind = keyof RefusalFacts;

/** A refusal: its kind and the facts of that kind. */
export type Refusal = { [K in RefusalKind]: { kind: K } & RefusalFacts[K] }[RefusalKind];

/** The log text of a refusal: its kind and facts, in no protocol's words. */
export function describeRefusal(refusal: Refusal): string {
  const { kind, ...facts } = refusal;
  return Object.keys(facts).length === 0 ? `refused: ${kind}` : `refused: ${kind} ${JSON.stringify(facts)}`;
}

/** Structured facts about a refusal; adapters may show them beside the message (v1: extra envelope fields). */
export type ErrorDetails = {
  /** The position, in the request, of the item refused. */
  keyIndex?: number;
  reason?: "KEY_EXISTS" | "DUPLICATE_IN_REQUEST";
  /** For DUPLICATE_IN_REQUEST: the earlier item that is the same key. */
  sameAsKeyIndex?: number;
  missingRoles?: string[];
  missingPermissions?: string[];
};

/** Something named by the request does not exist (or is not visible to the caller). */
export class NotFoundError extends DomainError {
  constructor(
    readonly what: string,
    readonly id: string,
    why: string | Refusal = { kind: "notFound", what, id },
  ) {
    super(why);
  }
}

/**
 * The request collides with the stored state: a key that exists already, or a row deleted concurrently. `index`
 * is the position, in the request, of the item that collided, when there is one.
 */
export class ConflictError extends DomainError {
  constructor(
    readonly what: string,
    why: string | Refusal,
    readonly index?: number,
    details?: ErrorDetails,
  ) {
    super(why, details);
  }
}

/** The request is well formed but the stored state does not allow it (a missing role, a feature turned off). */
export class PreconditionFailedError extends DomainError {
  constructor(
    readonly what: string,
    why: string | Refusal,
    readonly names: string[] = [],
    details?: ErrorDetails,
  ) {
    super(why, details);
  }
}

/** The input breaks a rule no schema can state alone (a combination of fields, a value against the stored state). */
export class InvalidInputError extends DomainError {}

/**
 * Which permission check of a compound operation refused, when the adapter answers it apart from the others (v1
 * answered these two 403 UNAUTHORIZED, every other missing permission 403 INSUFFICIENT_PERMISSIONS):
 * - `createWhileAdding`: keys.addRoles/addPermissions asked to create a missing role or permission;
 * - `disconnectWhileSetting`: keys.setRoles/setPermissions (or updateKey's roles/permissions) would disconnect one.
 */
export type PermissionCheck = "createWhileAdding" | "disconnectWhileSetting";

/** A permission query: a permission string, or `{and: [...]}` / `{or: [...]}` of queries, nested. */
export type PermissionQuery = string | { and: PermissionQuery[] } | { or: PermissionQuery[] };

/**
 * The caller's permissions do not satisfy what the operation needs (`need`, described; `have`, what it holds).
 * `refusal` replaces the plain `missingPermissions` where the operation says more (createKey: which roles are missing;
 * an import: which key needs what); `details` are facts for programs; `check` names the check that refused when an
 * adapter answers it apart (PermissionCheck).
 */
export class PermissionDeniedError extends DomainError {
  constructor(
    readonly need: string,
    readonly have: readonly string[],
    options: { refusal?: Refusal; check?: PermissionCheck; details?: ErrorDetails; query?: PermissionQuery } = {},
  ) {
    super(options.refusal ?? { kind: "missingPermissions", need, have: [...have] }, options.details);
    this.check = options.check;
    this.query = options.query;
  }

  /** The query that was not satisfied, when the check was one (an adapter may render it in its own syntax). */
  readonly query?: PermissionQuery;

  /** The check that refused, when it is one an adapter may answer differently (PermissionCheck). */
  readonly check?: PermissionCheck;
}

/** The caller may read keys but not their plaintext (the decrypt permission is missing). */
export class DecryptNotAllowedError extends DomainError {
  constructor(
    readonly apiId: string,
    /** The query that was not satisfied and what the caller held, for an adapter that names what it asks for. */
    readonly missing?: { query: PermissionQuery; have: readonly string[] },
  ) {
    super({ kind: "decryptNotAllowed", apiId });
  }
}

/** The workspace the request acts in is disabled. */
export class WorkspaceDisabledError extends DomainError {
  constructor() {
    super({ kind: "workspaceDisabled" });
  }
}

/**
 * Why a caller is no root key: none was sent (`missing`), a customer's API key was sent instead (`notRootKey`), or
 * the token is not known at all (`unknown`). Each adapter words its own refusal.
 */
export type UnauthenticatedReason = "missing" | "notRootKey" | "unknown";

/** The caller could not be authenticated as a root key (UnauthenticatedReason says why). */
export class UnauthenticatedError extends DomainError {
  constructor(readonly reason: UnauthenticatedReason) {
    super(`not authenticated: ${reason}`);
  }
}

/** The thing to delete is protected from deletion. */
export class DeleteProtectedError extends DomainError {
  constructor(
    readonly what: string,
    readonly id: string,
  ) {
    super({ kind: "deleteProtected", what, id });
  }
}

/**
 * A customer portal's refusal (core/portals): each surface answers its kinds with its own words and statuses (v2: the
 * portal error types of upstream; the portal page: a page).
 */
export class PortalRefusedError extends DomainError {
  declare readonly refusal: Refusal;
  constructor(refusal: Exclude<Extract<Refusal, { kind: `portal${string}` }>, { kind: "portalExists" | "portalOfApiExists" }>) {
    super(refusal);
  }
}
