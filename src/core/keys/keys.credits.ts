import { InvalidInputError } from "../../errors.js";

/** What a key's credits are being set by: keys.createKey, an import (v1's migrations, v2's keys.migrateKeys), keys.updateKey. */
export type CreditsChange = "create" | "import" | "update";

/**
 * Whether `credits` break the rule that a refill needs uses left: a refill given with unlimited uses (`remaining`
 * unset or null). A surface that checks it while validating the request's shape (v1's import schema, for its own
 * wording and path) asks this; the core refuses with requireRemainingForRefill.
 */
export function refillWithoutRemaining(credits: {
  readonly remaining?: number | null | undefined;
  readonly refill?: object | null | undefined;
}): boolean {
  return credits.refill !== undefined && credits.refill !== null && (credits.remaining === undefined || credits.remaining === null);
}

/**
 * The one rule that a refill needs uses left: a key with unlimited uses (`remaining` unset or null) has nothing to
 * refill, so a refill given with it is refused (InvalidInputError `refillOnUnlimited`), whoever sets the credits.
 */
export function requireRemainingForRefill(
  credits: { readonly remaining?: number | null | undefined; readonly refill?: object | null | undefined },
  during: CreditsChange,
): void {
  if (refillWithoutRemaining(credits)) {
    throw new InvalidInputError({ kind: "refillOnUnlimited", during });
  }
}
