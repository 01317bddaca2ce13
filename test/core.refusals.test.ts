import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { keyVerificationsWindow, planVerifications } from "../src/core/analytics/analytics.core.js";
import { assertIdentitySelector, assertMetaSize, MAX_IDENTITY_META_JSON } from "../src/core/identities/identities.core.js";
import { sealKeys } from "../src/core/import/import.plan.js";
import { givenNamespace } from "../src/core/ratelimits/ratelimits.core.js";
import {
  ConflictError,
  DecryptNotAllowedError,
  DeleteProtectedError,
  type DomainError,
  InvalidInputError,
  NotFoundError,
  PermissionDeniedError,
  type Refusal,
  WorkspaceDisabledError,
} from "../src/errors.js";
import { apiErrorOf, v1Message } from "../src/wire/v1/errors.js";

// The core refuses in kinds and facts (issue 12): no v1 wording under src/core, and the v1 adapter words each refusal.

function thrown(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (err) {
    return err as DomainError;
  }
  throw new Error("the call should have thrown");
}

describe("the core's refusals", () => {
  test("name their kind and facts; the core's own message is no v1 text", () => {
    const cases: [DomainError, Refusal, string][] = [
      [
        thrown(() => assertMetaSize({ blob: "x".repeat(MAX_IDENTITY_META_JSON) }, MAX_IDENTITY_META_JSON)),
        { kind: "metaTooLarge", size: MAX_IDENTITY_META_JSON + 11, max: MAX_IDENTITY_META_JSON },
        `metadata is too large, it must be less than 64k characters when json encoded, got: ${MAX_IDENTITY_META_JSON + 11}`,
      ],
      [thrown(() => assertIdentitySelector({})), { kind: "identitySelectorMissing" }, "Provide either identityId or externalId"],
      [
        thrown(() => givenNamespace({ namespaceId: "" })),
        { kind: "namespaceSelectorMissing" },
        "You must provide a namespaceId or a namespaceName",
      ],
      [
        thrown(() => planVerifications({ apiId: "api_x", order: "asc", start: 10, end: 10 }, 0)),
        { kind: "startNotBeforeEnd" },
        "start cannot be equal or greater than end",
      ],
      [
        thrown(() => planVerifications({ apiId: "api_x", order: "asc", start: 0, end: 10, groupBy: ["tag", "tags"] }, 0)),
        { kind: "groupByTagAndTags" },
        "You can not group by tag and tags at the same time",
      ],
      [thrown(() => keyVerificationsWindow({}, 0)), { kind: "keyOrOwnerRequired" }, "keyId or ownerId must be provided"],
      [
        thrown(() => keyVerificationsWindow({ keyId: "key_x", start: 2, end: 1 }, 0)),
        { kind: "startAfterEnd" },
        "start must not be after end",
      ],
      [new WorkspaceDisabledError(), { kind: "workspaceDisabled" }, "workspace is disabled"],
      [new DecryptNotAllowedError("api_x"), { kind: "decryptNotAllowed", apiId: "api_x" }, "you're not allowed to decrypt this key"],
      [
        new DeleteProtectedError("api", "api_x"),
        { kind: "deleteProtected", what: "api", id: "api_x" },
        "api api_x is protected from deletions",
      ],
      [new NotFoundError("key", "key_x"), { kind: "notFound", what: "key", id: "key_x" }, "key key_x not found"],
      [
        new PermissionDeniedError('one of ["*"]', ["a"]),
        { kind: "missingPermissions", need: 'one of ["*"]', have: ["a"] },
        'Missing permissions: need one of ["*"], have ["a"]',
      ],
    ];
    for (const [err, refusal, words] of cases) {
      expect(err.refusal).toEqual(refusal);
      expect(v1Message(err)).toBe(words);
      expect(apiErrorOf(err).message).toBe(words);
      expect(err.message).not.toBe(words);
    }
  });

  test("a key repeated in an import names both indexes, and the envelope keeps its reason", () => {
    const hash = { value: "h".repeat(43), variant: "sha256_base64" as const };
    const err = thrown(() => sealKeys([{ hash }, { hash: { ...hash, value: "g".repeat(43) } }, { hash }], { dataKey: undefined } as never));
    expect(err).toBeInstanceOf(ConflictError);
    expect(err.refusal).toEqual({ kind: "duplicateInRequest", index: 2, sameAsIndex: 0 });
    expect(err.details).toEqual({ reason: "DUPLICATE_IN_REQUEST", keyIndex: 2, sameAsKeyIndex: 0 });
    const wire = apiErrorOf(err);
    expect([wire.code, wire.message, wire.fields]).toEqual([
      "CONFLICT",
      "the key at index 2 is the same key as the one at index 0",
      { reason: "DUPLICATE_IN_REQUEST", keyIndex: 2, sameAsKeyIndex: 0 },
    ]);
  });

  test("an error without a refusal (a repository's own text) is shown as it says itself", () => {
    const err = new InvalidInputError("some repository's words");
    expect(err.refusal).toBeUndefined();
    expect(v1Message(err)).toBe("some repository's words");
  });
});

// Texts (or their fixed parts) v1 answers that the core used to carry; each now lives in wire/v1/errors.ts only.
const V1_TEXTS = [
  "with unlimited remaining requests, please 'set' a value instead",
  "a key by null",
  "remaining requests.",
  "Cannot set refill on a key with unlimited requests",
  "Cannot set 'refillDay' if 'interval' is 'daily'",
  "remaining must be greater than 0.",
  "remaining must be set if you are using refill.",
  "'refillDay' must be null.",
  "does not support recoverable keys",
  "do not exist; creating them needs one of the permissions",
  "insufficient permissions to encrypt keys",
  "you're not allowed to decrypt this key",
  "metadata is too large",
  "is already defined in the request",
  "Provide either identityId or externalId",
  "already exists in this workspace",
  "not found and not allowed to create",
  "You must provide a namespaceId or a namespaceName",
  "Override not found",
  "identifier not found",
  "Namespace not found",
  "are missing, please create them first",
  "is the same key as the one at index",
  "needs ${",
  "apiId is required: this server verifies",
  "was requested but does not exist for key",
  "start cannot be equal or greater than end",
  "You can not group by tag and tags",
  "orderBy=time needs groupBy",
  "keyId or ownerId must be provided",
  "start must not be after end",
  "No keys were found to match your query",
  "Identity with externalId",
  "workspace is disabled",
  "already exists`",
  "no longer exist",
  "could not be imported",
  "is protected from deletions",
  "Missing permissions: need",
  "encryption key they were stored with",
];

test("no v1 wording of a refusal is written under src/core", () => {
  const files = (readdirSync("src/core", { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
  const found = files.flatMap((f) => {
    const text = readFileSync(join("src/core", f), "utf8");
    return V1_TEXTS.filter((t) => text.includes(t)).map((t) => `${f}: ${t}`);
  });
  expect(found).toEqual([]);
  // Each of them is worded by the v1 adapter instead.
  const adapter = readFileSync("src/wire/v1/errors.ts", "utf8");
  expect(V1_TEXTS.filter((t) => !adapter.includes(t))).toEqual([]);
});
