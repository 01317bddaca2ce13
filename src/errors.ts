/**
 * Errors of the core (repositories, planners, workers): what went wrong, in plain fields, with no HTTP status, no
 * error code of a wire protocol and no envelope. A wire adapter maps them (v1: apiErrorOf in errors.ts, applied by
 * the error handler in app.ts). `message` is the text a client is shown.
 */
export abstract class DomainError extends Error {
  constructor(
    message: string,
    /** Facts a program may read instead of the message (which key of a batch, which names are missing). */
    readonly details?: ErrorDetails,
  ) {
    super(message);
  }
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
    message = `${what} ${id} not found`,
  ) {
    super(message);
  }
}

/**
 * The request collides with the stored state: a key that exists already, or a row deleted concurrently. `index`
 * is the position, in the request, of the item that collided, when there is one.
 */
export class ConflictError extends DomainError {
  constructor(
    readonly what: string,
    message: string,
    readonly index?: number,
    details?: ErrorDetails,
  ) {
    super(message, details);
  }
}

/** The request is well formed but the stored state does not allow it (a missing role, a feature turned off). */
export class PreconditionFailedError extends DomainError {
  constructor(
    readonly what: string,
    message: string,
    readonly names: string[] = [],
    details?: ErrorDetails,
  ) {
    super(message, details);
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

/**
 * The caller's permissions do not satisfy what the operation needs (`need`, described; `have`, what it holds).
 * `message` replaces the default text where the operation says more (createKey: which roles are missing; an import: which key needs what); `details` are facts for programs; `check`
 * names the check that refused when an adapter answers it apart (PermissionCheck).
 */
export class PermissionDeniedError extends DomainError {
  constructor(
    readonly need: string,
    readonly have: readonly string[],
    options: { message?: string; check?: PermissionCheck; details?: ErrorDetails } = {},
  ) {
    super(options.message ?? `Missing permissions: need ${need}, have [${have.map((p) => JSON.stringify(p)).join(", ")}]`, options.details);
    this.check = options.check;
  }

  /** The check that refused, when it is one an adapter may answer differently (PermissionCheck). */
  readonly check?: PermissionCheck;
}

/** The caller may read keys but not their plaintext (the decrypt permission is missing). */
export class DecryptNotAllowedError extends DomainError {
  constructor(readonly apiId: string) {
    super("you're not allowed to decrypt this key");
  }
}

/** The workspace the request acts in is disabled. */
export class WorkspaceDisabledError extends DomainError {
  constructor() {
    super("workspace is disabled");
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
    super(`${what} ${id} is protected from deletions`);
  }
}
