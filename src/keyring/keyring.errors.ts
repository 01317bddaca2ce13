import { PreconditionFailedError } from "../errors.js";

/**
 * The keyring's refusals: a precondition of the store (an encryption key, the right one) is missing, so they are
 * the core's PreconditionFailedError (v1: 412 PRECONDITION_FAILED with this message, through apiErrorOf).
 * - `NO_ENCRYPTION_KEY`: sealing or opening a plaintext needs KEYHAVEN_ENCRYPTION_KEY, and none is configured.
 * - `WRONG_ENCRYPTION_KEY`: the configured key did not wrap the workspace's data key.
 */
export class KeyringError extends PreconditionFailedError {
  constructor(
    readonly reason: "NO_ENCRYPTION_KEY" | "WRONG_ENCRYPTION_KEY",
    message: string,
  ) {
    super("encryption key", message);
    this.name = "KeyringError";
  }
}
