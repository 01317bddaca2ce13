/**
 * The keyring's refusals, as domain errors: they know nothing of HTTP. The HTTP adapter (app.ts's error handler)
 * answers each with 412 PRECONDITION_FAILED and this message.
 * - `NO_ENCRYPTION_KEY`: sealing or opening a plaintext needs KEYHAVEN_ENCRYPTION_KEY, and none is configured.
 * - `WRONG_ENCRYPTION_KEY`: the configured key did not wrap the workspace's data key.
 */
export class KeyringError extends Error {
  constructor(
    readonly reason: "NO_ENCRYPTION_KEY" | "WRONG_ENCRYPTION_KEY",
    message: string,
  ) {
    super(message);
    this.name = "KeyringError";
  }
}
