/**
 * Errors of the core (repositories, planners, workers): what went wrong, in plain fields, with no HTTP status, no
 * error code of a wire protocol and no envelope. A wire adapter maps them (v1: apiErrorOf in errors.ts, applied by
 * the error handler in app.ts). `message` is the text a client is shown.
 */
export abstract class DomainError extends Error {}

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
  ) {
    super(message);
  }
}

/** The request is well formed but the stored state does not allow it (a missing role, a feature turned off). */
export class PreconditionFailedError extends DomainError {
  constructor(
    readonly what: string,
    message: string,
    readonly names: string[] = [],
  ) {
    super(message);
  }
}
