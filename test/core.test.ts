import { describe, expect } from "vitest";
import { getKeyVerifications, getVerifications, keyVerificationsWindow, planVerifications } from "../src/core/analytics/analytics.core.js";
import { createApi, deleteApi, getApi, updateApi } from "../src/core/apis/apis.core.js";
import { createIdentity, getIdentity, updateIdentity } from "../src/core/identities/identities.core.js";
import { type Caller, rootKeyCaller } from "../src/core/caller.js";
import { getOverride, givenNamespace, limit, listNamespaces, setOverride } from "../src/core/ratelimits/ratelimits.core.js";
import { ConflictError, DeleteProtectedError, InvalidInputError, NotFoundError, PermissionDeniedError } from "../src/errors.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";
import { V1_IDENTITY_RULES } from "../src/wire/v1/identities/identities.schemas.js";
import { V1_LIMIT_RULES, V1_OVERRIDE_READ_RULES } from "../src/wire/v1/ratelimits/ratelimits.schemas.js";
import { test } from "./fixtures.js";
import { v1Words, v1WordsOfRejection, v1WordsOfThrow } from "./v1-words.js";

// The core (src/core/<domain>) is called here as a second protocol will call it: a plain principal, plain inputs,
// plain results, and domain errors that carry no HTTP status, v1 code or envelope.

const HOUR = 3_600_000;
// A v1 root key's caller (a Caller is a Principal, so the core functions that still take one accept it too).
const principal = (workspaceId: string, permissions: string[]): Caller =>
  rootKeyCaller({ rootKeyId: "rk_core_test", workspaceId, permissions: new Set(permissions) }, V1_ACCESS, { surface: "v1" });

describe("core: rate limits", () => {
  test("creates the namespace only for a caller that may create namespaces, and an override replaces the limit", async ({ h, t }) => {
    const epoch = () => h.services.epochs.current();
    // Every call in the middle of one window (the next minute's, ahead of the machine's clock, which the in-memory
    // limiter sweeps by): on the machine's clock the calls straddled a minute now and then, and the second limit
    // call found a fresh window (remaining 4 instead of 3).
    const minute = 60_000;
    const atMidWindow = Date.now() - (Date.now() % minute) + minute + minute / 2;
    const services = Object.assign({}, h.services, { clock: { now: () => atMidWindow } });
    const input = { namespace: "core-ns", identifier: "alice", limit: 2, duration: minute, cost: 1 };
    const cannotCreate = principal(t.workspaceId, ["ratelimit.*.limit"]);
    const err = await limit(services, cannotCreate, input, await epoch(), V1_LIMIT_RULES).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ what: "namespace", id: "core-ns", refusal: { kind: "notFound", what: "namespace", id: "core-ns" } });
    expect(v1Words(err)).toBe("namespace core-ns not found");

    const creator = principal(t.workspaceId, ["ratelimit.*.create_namespace", "ratelimit.*.limit"]);
    expect(await limit(services, creator, input, await epoch(), V1_LIMIT_RULES)).toMatchObject({ success: true, limit: 2, remaining: 1 });
    const { namespaces } = await listNamespaces(h.services, principal(t.workspaceId, ["*"]), { limit: 100 });
    const ns = namespaces.find((n) => n.name === "core-ns")!;
    expect(ns.id).toMatch(/^rlns_/);

    const owner = principal(t.workspaceId, ["*"]);
    const overrideId = await setOverride(
      h.services,
      owner,
      { namespaceId: ns.id },
      { identifier: "alice", limit: 5, duration: minute, async: false },
    );
    expect(await getOverride(h.services, owner, { namespaceName: "core-ns" }, "alice", V1_OVERRIDE_READ_RULES)).toMatchObject({
      id: overrideId,
      limit: 5,
    });
    expect(await limit(services, creator, input, await epoch(), V1_LIMIT_RULES)).toMatchObject({ success: true, limit: 5, remaining: 3 });
  });

  test("needs a namespace id or name, an empty one counting as none (input alone, before any lookup)", () => {
    expect(() => givenNamespace({ namespaceId: "", namespaceName: undefined })).toThrow(InvalidInputError);
    expect(givenNamespace({ namespaceId: "", namespaceName: "n" })).toEqual({ namespaceId: undefined, namespaceName: "n" });
  });

  test("answers a missing namespace and a missing override with NotFoundError", async ({ h, t }) => {
    const owner = principal(t.workspaceId, ["*"]);
    await expect(getOverride(h.services, owner, { namespaceId: "rlns_nope" }, "x", V1_OVERRIDE_READ_RULES)).rejects.toThrow(NotFoundError);
    expect(
      await v1WordsOfRejection(
        setOverride(h.services, owner, { namespaceName: "nope" }, { identifier: "abc", limit: 1, duration: 1000, async: false }),
      ),
    ).toContain("Namespace nope not found");
  });
});

describe("core: APIs", () => {
  test("refuses to delete a protected API with DeleteProtectedError, and a deleted one is not found", async ({ h, t }) => {
    const owner = principal(t.workspaceId, ["*"]);
    const protectedId = await createApi(h.services, owner, { name: "protected", deleteProtection: true });
    const err = await deleteApi(h.services, owner, protectedId).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeleteProtectedError);
    expect(err).toMatchObject({ what: "api", id: protectedId, refusal: { kind: "deleteProtected", what: "api", id: protectedId } });
    expect(v1Words(err)).toBe(`api ${protectedId} is protected from deletions`);

    const apiId = await createApi(h.services, owner, { name: "plain" });
    await updateApi(h.services, owner, { apiId, ipWhitelist: "127.0.0.1" });
    expect(await getApi(h.services, owner, apiId)).toMatchObject({ id: apiId, name: "plain", ipWhitelist: "127.0.0.1" });
    await deleteApi(h.services, owner, apiId);
    await expect(getApi(h.services, owner, apiId)).rejects.toThrow(new NotFoundError("api", apiId));
    expect(await v1WordsOfRejection(getApi(h.services, owner, apiId))).toContain(`api ${apiId} not found`);
  });

  test("checks the caller's permissions with PermissionDeniedError, before any lookup", async ({ h, t }) => {
    const reader = principal(t.workspaceId, ["api.*.read_api"]);
    await expect(createApi(h.services, reader, { name: "nope" })).rejects.toThrow(PermissionDeniedError);
    await expect(deleteApi(h.services, reader, "api_missing")).rejects.toThrow(PermissionDeniedError);
  });
});

describe("core: identities", () => {
  test("answers a taken externalId and a rate-limit name given twice with ConflictError, too large meta with InvalidInputError", async ({
    h,
    t,
  }) => {
    const owner = principal(t.workspaceId, ["*"]);
    const id = await createIdentity(h.services, owner, { externalId: "core-user", meta: { plan: "pro" } }, V1_IDENTITY_RULES);
    await expect(createIdentity(h.services, owner, { externalId: "core-user" }, V1_IDENTITY_RULES)).rejects.toThrow(ConflictError);
    const twice = [
      { name: "a", limit: 1, duration: 1000 },
      { name: "a", limit: 2, duration: 1000 },
    ];
    expect(
      await v1WordsOfRejection(createIdentity(h.services, owner, { externalId: "core-other", ratelimits: twice }, V1_IDENTITY_RULES)),
    ).toContain('Ratelimit with name "a" is already defined in the request');
    await expect(
      updateIdentity(h.services, owner, { identityId: id, environment: "default", ratelimits: twice }, V1_IDENTITY_RULES),
    ).rejects.toThrow(ConflictError);
    await expect(
      createIdentity(h.services, owner, { externalId: "core-big", meta: { blob: "x".repeat(64_000) } }, V1_IDENTITY_RULES),
    ).rejects.toThrow(InvalidInputError);
    expect(await getIdentity(h.services, owner, { externalId: "core-user" })).toEqual({
      id,
      externalId: "core-user",
      meta: { plan: "pro" },
      ratelimits: [],
    });
    await expect(getIdentity(h.services, owner, {})).rejects.toThrow(InvalidInputError);
  });

  test("refuses a caller with read_identity on another identity alike whether the externalId exists or not", async ({ h, t }) => {
    const owner = principal(t.workspaceId, ["*"]);
    await createIdentity(h.services, owner, { externalId: "core-secret" }, V1_IDENTITY_RULES);
    const narrow = principal(t.workspaceId, ["identity.id_other.read_identity"]);
    const exists = await getIdentity(h.services, narrow, { externalId: "core-secret" }).catch((e: unknown) => e);
    const missing = await getIdentity(h.services, narrow, { externalId: "core-nobody" }).catch((e: unknown) => e);
    expect(exists).toBeInstanceOf(PermissionDeniedError);
    expect(missing).toBeInstanceOf(PermissionDeniedError);
  });
});

describe("core: analytics", () => {
  test("checks the query's input alone with InvalidInputError", () => {
    const query = { apiId: "api_x", start: 10 * HOUR, order: "asc" as const };
    expect(v1WordsOfThrow(() => planVerifications({ ...query, end: 10 * HOUR }, 0))).toContain("start cannot be equal or greater than end");
    expect(() => planVerifications({ ...query, groupBy: ["tag", "tags"] }, 20 * HOUR)).toThrow(InvalidInputError);
    expect(v1WordsOfThrow(() => planVerifications({ ...query, orderBy: "time" }, 20 * HOUR))).toContain(
      "orderBy=time needs groupBy hour, day or month",
    );
    expect(planVerifications({ ...query, groupBy: ["day", "hour"] }, 20 * HOUR)).toMatchObject({ end: 20 * HOUR, time: "day" });
    expect(v1WordsOfThrow(() => keyVerificationsWindow({}, 0))).toContain("keyId or ownerId must be provided");
    expect(keyVerificationsWindow({ keyId: "key_x" }, 30 * HOUR)).toEqual({ start: 6 * HOUR, end: 30 * HOUR });
  });

  test("fills every hour of a time-only query with zeros, and answers unknown APIs and keys with NotFoundError", async ({
    h,
    t,
    apiId,
  }) => {
    const owner = principal(t.workspaceId, ["*"]);
    const query = { apiId, start: 100 * HOUR, end: 103 * HOUR + 5, groupBy: ["hour" as const], order: "asc" as const };
    const rows = await getVerifications(h.services, owner, query, planVerifications(query, 0));
    expect(rows.map((r) => [r.time, r.total])).toEqual([
      [100 * HOUR, 0],
      [101 * HOUR, 0],
      [102 * HOUR, 0],
    ]);
    const missing = { ...query, apiId: "api_missing" };
    expect(await v1WordsOfRejection(getVerifications(h.services, owner, missing, planVerifications(missing, 0)))).toContain(
      "api api_missing not found",
    );
    await expect(getKeyVerifications(h.services, owner, { keyId: "key_missing" }, { start: 0, end: HOUR })).rejects.toThrow(NotFoundError);
  });
});
