import { expect } from "vitest";
import { DomainError } from "../src/errors.js";
import { v1Message } from "../src/wire/v1/errors.js";

// The core refuses in kinds and facts; v1's words for them live in the adapter. Core tests that pinned a refusal's
// text pin it here, as v1 words it, beside the refusal itself.

/** v1's text for a domain error (failing the test when `err` is none). */
export function v1Words(err: unknown): string {
  expect(err, "a domain error was expected").toBeInstanceOf(DomainError);
  return v1Message(err as DomainError);
}

/** v1's text for the domain error the promise rejects with. */
export async function v1WordsOfRejection(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  return v1Words(err);
}

/** v1's text for the domain error `fn` throws. */
export function v1WordsOfThrow(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return v1Words(err);
  }
  throw new Error("the call should have thrown");
}

/** The domain error the promise rejects with (failing the test when it resolves or rejects with something else). */
export async function domainRejection(promise: Promise<unknown>): Promise<DomainError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the promise should have been rejected with a domain error").toBeInstanceOf(DomainError);
  return err as DomainError;
}
