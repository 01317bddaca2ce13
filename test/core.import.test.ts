import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { batchFailureOf } from "../src/core/import/import.batch.js";
import { enqueueKeys } from "../src/core/import/import.enqueue.js";
import { importKeys } from "../src/core/import/import.keys.js";
import { readMigration, retryMigration } from "../src/core/import/import.status.js";
import type { Caller } from "../src/core/caller.js";
import { hashKey } from "../src/crypto/hash.js";
import { ConflictError, InvalidInputError, NotFoundError, PermissionDeniedError, PreconditionFailedError } from "../src/errors.js";
import { ApiError } from "../src/http/errors.js";
import { apiErrorOf, v1StoredError } from "../src/wire/v1/errors.js";
import { enqueueKeySchema, importKeySchema } from "../src/wire/v1/migrations/migrations.schemas.js";
import { callerOf } from "./caller-of.js";
import { test } from "./fixtures.js";
import { v1Words } from "./v1-words.js";

// The import's core called directly, as a second protocol's adapter would: a plain principal in (no root key, no
// request), plain results or domain errors out, and no v1 code, status or envelope anywhere.
// (A Caller, as the write gate needs one: the principal with a test actor.)
const caller = (workspaceId: string, ...permissions: string[]): Caller => callerOf({ workspaceId, permissions: new Set(permissions) });
const randomHash = () => hashKey(randomBytes(16).toString("hex"));
const byHash = (apiId: string, fields: Record<string, unknown> = {}) =>
  importKeySchema.parse({ apiId, hash: { value: randomHash(), variant: "sha256_base64" }, ...fields });
const queued = (fields: Record<string, unknown> = {}) =>
  enqueueKeySchema.parse({ hash: { value: randomHash(), variant: "sha256_base64" }, ...fields });
const newMigrationId = () => `mig_${randomBytes(6).toString("hex")}`;
const rejection = async (promise: Promise<unknown>) => {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the promise should have been rejected").toBeInstanceOf(Error);
  return err as Error;
};

describe("importKeys", () => {
  test("refuses a key the caller may not import with PermissionDeniedError naming its index, before any lookup", async ({
    h,
    t,
    apiId,
  }) => {
    const err = await rejection(
      importKeys(h.services, caller(t.workspaceId, `api.${apiId}.create_key`), [byHash(apiId), byHash("api_unknown")], Date.now()),
    );
    expect(err).toBeInstanceOf(PermissionDeniedError);
    const need = 'one of the permissions "*", "api.*.create_key" or "api.api_unknown.create_key"';
    expect((err as PermissionDeniedError).refusal).toEqual({ kind: "importKeyNotAllowed", index: 1, need });
    expect(v1Words(err)).toBe('the key at index 1 needs one of the permissions "*", "api.*.create_key" or "api.api_unknown.create_key"');
    expect((err as PermissionDeniedError).details).toEqual({ keyIndex: 1 });
    // The v1 adapter's mapping keeps the index as an envelope field, which the import CLI reads.
    const wire = apiErrorOf(err as PermissionDeniedError);
    expect([wire.code, wire.message, wire.fields]).toEqual(["INSUFFICIENT_PERMISSIONS", v1Words(err), { keyIndex: 1 }]);
  });

  test("refuses a refill on a key with unlimited uses, whatever the adapter's schema let through, and writes nothing", async ({
    h,
    t,
    apiId,
  }) => {
    const all = caller(t.workspaceId, "*");
    const hash = randomHash();
    const item = { apiId, hash: { value: hash, variant: "sha256_base64" as const }, refill: { interval: "daily" as const, amount: 5 } };
    const err = await rejection(importKeys(h.services, all, [item], Date.now()));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).refusal).toEqual({ kind: "refillOnUnlimited", during: "import" });
    expect(v1Words(err)).toBe("remaining must be set if you are using refill.");
    const queuedErr = await rejection(
      enqueueKeys(h.services, all, { migrationId: newMigrationId(), apiId, keys: [{ hash: item.hash, refill: item.refill }] }),
    );
    expect((queuedErr as InvalidInputError).refusal).toEqual({ kind: "refillOnUnlimited", during: "import" });
    expect(await h.sql(`select id from keys where hash = '${hash}'`)).toEqual([]);
  });

  test("refuses an unknown API, missing roles and a repeated key with domain errors, and writes nothing", async ({ h, t, apiId }) => {
    const all = caller(t.workspaceId, "*");
    const unknownApi = await rejection(importKeys(h.services, all, [byHash(apiId), byHash("api_unknown")], Date.now()));
    expect(unknownApi).toBeInstanceOf(NotFoundError);
    expect((unknownApi as NotFoundError).refusal).toEqual({ kind: "notFound", what: "api", id: "api_unknown" });
    expect(v1Words(unknownApi)).toBe("api api_unknown not found");

    const missingRole = await rejection(importKeys(h.services, all, [byHash(apiId, { roles: ["nope"] })], Date.now()));
    expect(missingRole).toBeInstanceOf(PreconditionFailedError);
    expect((missingRole as PreconditionFailedError).details).toEqual({ missingRoles: ["nope"] });
    expect((missingRole as PreconditionFailedError).refusal).toEqual({ kind: "importRolesMissing", names: ["nope"] });

    const twice = byHash(apiId);
    const repeated = await rejection(importKeys(h.services, all, [twice, byHash(apiId), twice], Date.now()));
    expect(repeated).toBeInstanceOf(ConflictError);
    expect((repeated as ConflictError).details).toEqual({ reason: "DUPLICATE_IN_REQUEST", keyIndex: 2, sameAsKeyIndex: 0 });
    expect((repeated as ConflictError).refusal).toEqual({ kind: "duplicateInRequest", index: 2, sameAsIndex: 0 });
    expect(await h.sql(`select id from keys where hash = '${twice.hash!.value}'`)).toEqual([]);
  });

  test("imports the keys and answers their ids in order; a key that exists is a ConflictError with its index", async ({ h, t, apiId }) => {
    const all = caller(t.workspaceId, "*");
    const items = [byHash(apiId, { name: "first" }), byHash(apiId, { name: "second" })];
    const ids = await importKeys(h.services, all, items, Date.now());
    const rows = await h.sql<{ id: string; name: string }>(
      `select id, name from keys where id in ('${ids[0]}', '${ids[1]}') order by name`,
    );
    expect(rows).toEqual([
      { id: ids[0], name: "first" },
      { id: ids[1], name: "second" },
    ]);
    const exists = await rejection(importKeys(h.services, all, [byHash(apiId), items[1]!], Date.now()));
    expect(exists).toBeInstanceOf(ConflictError);
    expect((exists as ConflictError).details).toEqual({ reason: "KEY_EXISTS", keyIndex: 1 });
  });
});

describe("enqueueKeys", () => {
  test("checks the caller's permission before the API, then the API, then the names; stores nothing for none", async ({ h, t, apiId }) => {
    const denied = await rejection(
      enqueueKeys(h.services, caller(t.workspaceId, "api.other.create_key"), {
        migrationId: newMigrationId(),
        apiId: "api_unknown",
        keys: [queued()],
      }),
    );
    expect(denied).toBeInstanceOf(PermissionDeniedError);
    const all = caller(t.workspaceId, "*");
    const unknownApi = await rejection(
      enqueueKeys(h.services, all, { migrationId: newMigrationId(), apiId: "api_unknown", keys: [queued()] }),
    );
    expect(unknownApi).toBeInstanceOf(NotFoundError);
    expect((unknownApi as NotFoundError).refusal).toEqual({ kind: "notFound", what: "api", id: "api_unknown" });
    expect(v1Words(unknownApi)).toBe("api api_unknown not found");
    const missing = await rejection(
      enqueueKeys(h.services, all, { migrationId: newMigrationId(), apiId, keys: [queued({ permissions: ["gone"] })] }),
    );
    expect((missing as PreconditionFailedError).details).toEqual({ missingPermissions: ["gone"] });
    expect((missing as PreconditionFailedError).refusal).toEqual({ kind: "importPermissionsMissing", names: ["gone"] });

    const empty = newMigrationId();
    expect(await enqueueKeys(h.services, all, { migrationId: empty, apiId, keys: [] })).toBe(false);
    const stored = newMigrationId();
    expect(await enqueueKeys(h.services, all, { migrationId: stored, apiId, keys: [queued(), queued()] })).toBe(true);
    const batches = await h.sql<{ migration_id: string }>(
      `select migration_id from migration_batches where migration_id in ('${empty}', '${stored}')`,
    );
    expect(batches).toEqual([{ migration_id: stored }]);
  });
});

describe("readMigration and retryMigration", () => {
  test("refuse a caller without read_api before the lookup, and an unknown migration with NotFoundError", async ({ h, t }) => {
    const migrationId = newMigrationId();
    const denied = await rejection(readMigration(h.db, caller(t.workspaceId, "api.*.create_key"), migrationId));
    expect(denied).toBeInstanceOf(PermissionDeniedError);
    expect((denied as PermissionDeniedError).refusal).toMatchObject({ kind: "missingPermissions", have: ["api.*.create_key"] });
    expect(v1Words(denied)).toBe(
      'Missing permissions: need one of ["*", "api.*.read_api"], or "api.<apiId>.read_api" for every API of the migration, have ["api.*.create_key"]',
    );
    const unknown = await rejection(readMigration(h.db, caller(t.workspaceId, "*"), migrationId));
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect((unknown as NotFoundError).refusal).toEqual({ kind: "notFound", what: "migration", id: migrationId });
    expect(v1Words(unknown)).toBe(`migration ${migrationId} not found`);
    const retried = await rejection(retryMigration(h.services, caller(t.workspaceId, "*"), migrationId));
    expect(retried).toBeInstanceOf(NotFoundError);
    expect(v1Words(retried)).toBe(`migration ${migrationId} not found`);
  });
});

describe("the worker's failure report", () => {
  test("shows a domain error's message and only the kind of any other failure, whatever its class", () => {
    const shown = (err: unknown) => v1StoredError({ code: "", message: "", refusal: batchFailureOf(err) });
    expect(batchFailureOf(new NotFoundError("api", "api_x"))).toEqual({
      kind: "importBatchFailed",
      cause: { kind: "notFound", what: "api", id: "api_x" },
    });
    expect(shown(new NotFoundError("api", "api_x")).message).toBe("the batch could not be imported: api api_x not found");
    expect(batchFailureOf(new Error("duplicate key sk_live_secret"))).toEqual({ kind: "importBatchFailed", failure: "unexpected error" });
    // The core reports by domain errors alone: a wire error reaching it is unexpected, and its text is not shown.
    expect(batchFailureOf(new ApiError("CONFLICT", "sk_live_secret"))).toEqual({ kind: "importBatchFailed", failure: "unexpected error" });
    expect(shown(new ApiError("CONFLICT", "sk_live_secret"))).toEqual({
      code: "INTERNAL_SERVER_ERROR",
      message: "the batch could not be imported: unexpected error",
    });
  });

  test("stores kinds and facts, which v1 words as it always did; rows stored before refusals show their own text", () => {
    expect(v1StoredError({ code: "", message: "", refusal: { kind: "importKeyExists", index: 3 } })).toEqual({
      code: "CONFLICT",
      message: "the key at index 3 already exists",
    });
    expect(
      v1StoredError({ code: "", message: "", refusal: { kind: "importNamesGone", roles: ["a"], permissions: ["p.x", "p.y"] } }),
    ).toEqual({
      code: "PRECONDITION_FAILED",
      message: 'roles ["a"] and permissions ["p.x","p.y"] no longer exist',
    });
    expect(v1StoredError({ code: "", message: "", refusal: { kind: "importNamesGone", roles: [], permissions: ["p.x"] } }).message).toBe(
      'permissions ["p.x"] no longer exist',
    );
    expect(v1StoredError({ code: "", message: "", refusal: { kind: "notFound", what: "api", id: "api_x" } })).toEqual({
      code: "NOT_FOUND",
      message: "api api_x not found",
    });
    expect(v1StoredError({ code: "CONFLICT", message: "the key at index 0 already exists", refusal: null })).toEqual({
      code: "CONFLICT",
      message: "the key at index 0 already exists",
    });
  });
});
