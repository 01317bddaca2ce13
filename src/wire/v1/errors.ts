import {
  ConflictError,
  DecryptNotAllowedError,
  DeleteProtectedError,
  type DomainError,
  InvalidInputError,
  NotFoundError,
  PermissionDeniedError,
  PreconditionFailedError,
  UnauthenticatedError,
  type UnauthenticatedReason,
  WorkspaceDisabledError,
} from "../../errors.js";
import { ApiError } from "../../http/errors.js";

/** v1's words for a caller that is no root key (all 403 UNAUTHORIZED, as v1 clients expect). */
const UNAUTHENTICATED_MESSAGES: Record<UnauthenticatedReason, string> = {
  missing: "key required",
  notRootKey: "root key required",
  unknown: "key not found",
};

/** The v1 answer to a core error: the one place where domain errors become codes and statuses. */
export function apiErrorOf(err: DomainError): ApiError {
  if (err instanceof NotFoundError) return new ApiError("NOT_FOUND", err.message, err.details);
  if (err instanceof ConflictError) return new ApiError("CONFLICT", err.message, err.details);
  if (err instanceof PreconditionFailedError) return new ApiError("PRECONDITION_FAILED", err.message, err.details);
  if (err instanceof InvalidInputError) return new ApiError("BAD_REQUEST", err.message, err.details);
  // v1 answers a missing decrypt permission with UNAUTHORIZED, not INSUFFICIENT_PERMISSIONS (getKey, listKeys).
  if (err instanceof DecryptNotAllowedError) return new ApiError("UNAUTHORIZED", err.message, err.details);
  // v1 answered creating while adding, and disconnecting while setting, 403 UNAUTHORIZED; any other missing permission
  // 403 INSUFFICIENT_PERMISSIONS.
  if (err instanceof PermissionDeniedError)
    return new ApiError(err.check === undefined ? "INSUFFICIENT_PERMISSIONS" : "UNAUTHORIZED", err.message, err.details);
  if (err instanceof UnauthenticatedError) return new ApiError("UNAUTHORIZED", UNAUTHENTICATED_MESSAGES[err.reason]);
  if (err instanceof WorkspaceDisabledError) return new ApiError("FORBIDDEN", err.message);
  if (err instanceof DeleteProtectedError) return new ApiError("DELETE_PROTECTED", err.message);
  return new ApiError("INTERNAL_SERVER_ERROR", "internal server error");
}
