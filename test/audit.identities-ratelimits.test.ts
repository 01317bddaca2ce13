import { describe, expect } from "vitest";
import { type Caller, rootKeyCaller, trustedCaller, withAccess } from "../src/core/caller.js";
import { createIdentity, updateIdentity, updateIdentityByRef } from "../src/core/identities/identities.core.js";
import { type RecordChange, WriteGate } from "../src/core/changes.js";
import type { Db } from "../src/storage/client.js";
import { setOverride } from "../src/core/ratelimits/ratelimits.core.js";
import { NotFoundError, PermissionDeniedError } from "../src/errors.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";
import { V1_IDENTITY_RULES } from "../src/wire/v1/identities/identities.schemas.js";
import { auditEntries } from "./audit-entries.js";
import { test as it } from "./fixtures.js";
import type { Harness, Response, Tenant } from "./helper.js";

// Identities and rate-limit overrides, through v1 and v2, record their audit entries in the change's own transaction:
// the event, the root key that acted, the targets, the workspace, the surface, the request id, and the NAMES of the
// fields set (never a value of meta). A refused call records nothing; limit (not a change) records nothing either.

const DAY = 86_400_000;

/** The request id the answer quotes: v1's Unkey-Request-Id header, v2's meta.requestId. */
const requestIdOf = (res: Response): string =>
  (res.body?.meta?.requestId as string | undefined) ?? (res.headers["unkey-request-id"] as string);

async function entriesOf(h: Harness, t: Tenant, res: Response) {
  const id = requestIdOf(res);
  expect(id).toBeTruthy();
  return (await auditEntries(h, { workspaceId: t.workspaceId })).filter((e) => e.requestId === id);
}

async function ok(res: Response) {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res;
}

/** The id of the live namespace of this name, created by a first limit call (which records nothing). */
async function namespaceOf(h: Harness, t: Tenant, name: string): Promise<string> {
  const limit = await ok(await h.post("/v2/ratelimit.limit", { namespace: name, identifier: "seed", limit: 10, duration: DAY }, t.rootKey));
  expect(await entriesOf(h, t, limit)).toEqual([]);
  const [row] = await h.sql<{ id: string }>(
    `select id from ratelimit_namespaces where workspace_id = '${t.workspaceId}' and name = '${name}' and deleted_at_m is null`,
  );
  return row!.id;
}

const SECRET_META = "meta-value-never-in-the-audit-log";

describe("audit log: identities", () => {
  it("v1 createIdentity, updateIdentity and deleteIdentity each record their change, with field names only", async ({ h, t }) => {
    const create = await ok(
      await h.post(
        "/v1/identities.createIdentity",
        { externalId: "audit-user-v1", meta: { secret: SECRET_META }, ratelimits: [{ name: "rl", limit: 5, duration: 1000 }] },
        t.rootKey,
      ),
    );
    const identityId = create.body.identityId as string;
    const target = { type: "identity", id: identityId, name: "audit-user-v1" };
    const created = await entriesOf(h, t, create);
    expect(created).toMatchObject([
      {
        event: "identity.create",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v1",
        targets: [target],
        details: { fields: ["meta", "ratelimits"] },
      },
    ]);
    expect(JSON.stringify(created)).not.toContain(SECRET_META);

    const update = await ok(await h.post("/v1/identities.updateIdentity", { identityId, meta: { secret: `${SECRET_META}-2` } }, t.rootKey));
    const updated = await entriesOf(h, t, update);
    expect(updated).toMatchObject([
      {
        event: "identity.update",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v1",
        targets: [target],
        details: { fields: ["meta"] },
      },
    ]);
    expect(JSON.stringify(updated)).not.toContain(SECRET_META);
    const byExternalId = await ok(
      await h.post("/v1/identities.updateIdentity", { externalId: "audit-user-v1", ratelimits: [] }, t.rootKey),
    );
    expect(await entriesOf(h, t, byExternalId)).toMatchObject([
      { event: "identity.update", targets: [target], details: { fields: ["ratelimits"] } },
    ]);

    const remove = await ok(await h.post("/v1/identities.deleteIdentity", { identityId }, t.rootKey));
    expect(await entriesOf(h, t, remove)).toMatchObject([
      {
        event: "identity.delete",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v1",
        targets: [target],
      },
    ]);
  });

  it("v2 createIdentity, updateIdentity and deleteIdentity each record theirs", async ({ h, t }) => {
    const create = await ok(await h.post("/v2/identities.createIdentity", { externalId: "audit-user-v2" }, t.rootKey));
    const identityId = create.body.data.identityId as string;
    const target = { type: "identity", id: identityId, name: "audit-user-v2" };
    expect(await entriesOf(h, t, create)).toMatchObject([
      {
        event: "identity.create",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v2",
        targets: [target],
        details: { fields: [] },
      },
    ]);

    const update = await ok(
      await h.post(
        "/v2/identities.updateIdentity",
        {
          identity: "audit-user-v2",
          meta: { secret: SECRET_META },
          ratelimits: [{ name: "rl-v2", limit: 5, duration: 1000, autoApply: true }],
        },
        t.rootKey,
      ),
    );
    const updated = await entriesOf(h, t, update);
    expect(updated).toMatchObject([
      {
        event: "identity.update",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v2",
        targets: [target],
        details: { fields: ["meta", "ratelimits"] },
      },
    ]);
    expect(JSON.stringify(updated)).not.toContain(SECRET_META);

    const remove = await ok(await h.post("/v2/identities.deleteIdentity", { identity: identityId }, t.rootKey));
    expect(await entriesOf(h, t, remove)).toMatchObject([
      { event: "identity.delete", actorId: t.rootKeyId, workspaceId: t.workspaceId, surface: "v2", targets: [target] },
    ]);
  });

  it("a refused call (403, 404, 409, 400) records nothing", async ({ h, t }) => {
    const reader = await h.rootKey(t.workspaceId, ["identity.*.read_identity"]);
    await ok(await h.post("/v1/identities.createIdentity", { externalId: "audit-taken" }, t.rootKey));
    const before = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    expect((await h.post("/v1/identities.createIdentity", { externalId: "audit-denied" }, reader)).status).toBe(403);
    expect((await h.post("/v2/identities.createIdentity", { externalId: "audit-denied" }, reader)).status).toBe(403);
    expect((await h.post("/v1/identities.updateIdentity", { externalId: "audit-taken", meta: {} }, reader)).status).toBe(403);
    expect((await h.post("/v2/identities.deleteIdentity", { identity: "audit-taken" }, reader)).status).toBe(403);
    expect((await h.post("/v1/identities.createIdentity", { externalId: "audit-taken" }, t.rootKey)).status).toBe(409);
    expect((await h.post("/v2/identities.createIdentity", { externalId: "audit-taken" }, t.rootKey)).status).toBe(409);
    expect((await h.post("/v1/identities.updateIdentity", { identityId: "id_missing", meta: {} }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v2/identities.updateIdentity", { identity: "nobody-here", meta: {} }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v1/identities.deleteIdentity", { identityId: "id_missing" }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v2/identities.deleteIdentity", { identity: "nobody-here" }, t.rootKey)).status).toBe(404);
    const twice = [
      { name: "a", limit: 1, duration: 1000 },
      { name: "a", limit: 2, duration: 1000 },
    ];
    expect((await h.post("/v1/identities.createIdentity", { externalId: "audit-twice", ratelimits: twice }, t.rootKey)).status).toBe(409);
    const big = { blob: "x".repeat(64_000) };
    expect((await h.post("/v1/identities.createIdentity", { externalId: "audit-big", meta: big }, t.rootKey)).status).toBe(400);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toHaveLength(before);
  });
});

describe("audit log: rate-limit overrides", () => {
  it("v1 setOverride and deleteOverride record their change (targets the namespace and the override)", async ({ h, t }) => {
    const namespaceId = await namespaceOf(h, t, "audit-ns-v1");
    const set = await ok(
      await h.post(
        "/v1/ratelimits.setOverride",
        { namespaceName: "audit-ns-v1", identifier: "user-*", limit: 7, duration: 60_000, async: true },
        t.rootKey,
      ),
    );
    const overrideId = set.body.overrideId as string;
    const targets = [
      { type: "ratelimitNamespace", id: namespaceId, name: "audit-ns-v1" },
      { type: "ratelimitOverride", id: overrideId, name: "user-*" },
    ];
    expect(await entriesOf(h, t, set)).toMatchObject([
      {
        event: "ratelimit.set_override",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v1",
        targets,
        details: { limit: 7, duration: 60_000, async: true },
      },
    ]);
    // Setting it again replaces it, and records that change too.
    const again = await ok(
      await h.post("/v1/ratelimits.setOverride", { namespaceId, identifier: "user-*", limit: 8, duration: 60_000 }, t.rootKey),
    );
    expect(again.body.overrideId).toBe(overrideId);
    expect(await entriesOf(h, t, again)).toMatchObject([
      { event: "ratelimit.set_override", targets, details: { limit: 8, duration: 60_000, async: false } },
    ]);

    const remove = await ok(await h.post("/v1/ratelimits.deleteOverride", { namespaceId, identifier: "user-*" }, t.rootKey));
    expect(await entriesOf(h, t, remove)).toMatchObject([
      {
        event: "ratelimit.delete_override",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v1",
        targets,
      },
    ]);
  });

  it("v2 setOverride and deleteOverride record theirs", async ({ h, t }) => {
    const namespaceId = await namespaceOf(h, t, "audit-ns-v2");
    const set = await ok(
      await h.post("/v2/ratelimit.setOverride", { namespace: namespaceId, identifier: "alice", limit: 0, duration: DAY }, t.rootKey),
    );
    const overrideId = set.body.data.overrideId as string;
    const targets = [
      { type: "ratelimitNamespace", id: namespaceId, name: "audit-ns-v2" },
      { type: "ratelimitOverride", id: overrideId, name: "alice" },
    ];
    expect(await entriesOf(h, t, set)).toMatchObject([
      {
        event: "ratelimit.set_override",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        workspaceId: t.workspaceId,
        surface: "v2",
        targets,
        details: { limit: 0, duration: DAY, async: false },
      },
    ]);
    const remove = await ok(await h.post("/v2/ratelimit.deleteOverride", { namespace: "audit-ns-v2", identifier: "alice" }, t.rootKey));
    expect(await entriesOf(h, t, remove)).toMatchObject([
      { event: "ratelimit.delete_override", actorId: t.rootKeyId, workspaceId: t.workspaceId, surface: "v2", targets },
    ]);
  });

  it("a refused call (403, 404, 400) records nothing, and neither does limit", async ({ h, t }) => {
    const namespaceId = await namespaceOf(h, t, "audit-ns-refused");
    const reader = await h.rootKey(t.workspaceId, ["ratelimit.*.read_override"]);
    await ok(await h.post("/v2/ratelimit.setOverride", { namespace: namespaceId, identifier: "kept", limit: 1, duration: DAY }, t.rootKey));
    const before = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    const body = { identifier: "bob", limit: 1, duration: DAY };
    expect((await h.post("/v1/ratelimits.setOverride", { namespaceId, ...body }, reader)).status).toBe(403);
    expect((await h.post("/v2/ratelimit.setOverride", { namespace: namespaceId, ...body }, reader)).status).toBe(403);
    expect((await h.post("/v1/ratelimits.deleteOverride", { namespaceId, identifier: "kept" }, reader)).status).toBe(403);
    expect((await h.post("/v2/ratelimit.deleteOverride", { namespace: namespaceId, identifier: "kept" }, reader)).status).toBe(403);
    expect((await h.post("/v1/ratelimits.setOverride", { namespaceName: "audit-ns-none", ...body }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v2/ratelimit.setOverride", { namespace: "audit-ns-none", ...body }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v1/ratelimits.deleteOverride", { namespaceId, identifier: "nobody" }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v2/ratelimit.deleteOverride", { namespace: namespaceId, identifier: "nobody" }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v1/ratelimits.setOverride", { namespaceId, ...body, duration: 10 }, t.rootKey)).status).toBe(400);
    // limit is not a change: counting, and creating a namespace on the way, record nothing.
    await ok(await h.post("/v1/ratelimits.limit", { namespace: "audit-ns-new", identifier: "x", limit: 1, duration: 60_000 }, t.rootKey));
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toHaveLength(before);
  });
});

describe("the override and identity rules follow the caller, not a protocol name", () => {
  it("the access policy's check decides whether a missing namespace is refused (403) or not found (404) first", async ({ h, t }) => {
    const narrow = rootKeyCaller(
      { rootKeyId: "rk_audit_core", workspaceId: t.workspaceId, permissions: new Set(["ratelimit.rlns_other.set_override"]) },
      V1_ACCESS,
      { surface: "v1" },
    );
    const input = { identifier: "bob", limit: 1, duration: DAY, async: false };
    const missing = { namespaceName: "audit-ns-missing" };
    await expect(setOverride(h.services, narrow, missing, input)).rejects.toThrow(PermissionDeniedError);
    const afterLookup = withAccess(narrow, { check: "afterLookup" });
    await expect(setOverride(h.services, afterLookup, missing, input)).rejects.toThrow(NotFoundError);
    // After the lookup the namespace's own permission suffices, whichever surface the caller came from.
    const namespaceId = await namespaceOf(h, t, "audit-ns-own");
    const own = withAccess(
      rootKeyCaller(
        { rootKeyId: "rk_audit_core", workspaceId: t.workspaceId, permissions: new Set([`ratelimit.${namespaceId}.set_override`]) },
        V1_ACCESS,
        { surface: "v1", requestId: "req_audit_core_own" },
      ),
      { check: "afterLookup" },
    );
    await expect(setOverride(h.services, narrow, { namespaceId }, input)).rejects.toThrow(PermissionDeniedError);
    const overrideId = await setOverride(h.services, own, { namespaceId }, input);
    expect((await auditEntries(h, { workspaceId: t.workspaceId })).filter((e) => e.requestId === "req_audit_core_own")).toMatchObject([
      { event: "ratelimit.set_override", actorId: "rk_audit_core", targets: [{ id: namespaceId }, { id: overrideId, name: "bob" }] },
    ]);
  });

  it("a CLI caller's identity change is recorded as the CLI's", async ({ h, t }) => {
    const cli = trustedCaller({ kind: "cli", id: "cli", name: "keyhaven cli" }, t.workspaceId, { surface: "cli" });
    const id = await createIdentity(h.services, cli, { externalId: "audit-cli-user" }, V1_IDENTITY_RULES);
    const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "identity.create" });
    expect(entries.filter((e) => e.targets.some((target) => target.id === id))).toMatchObject([
      { actorKind: "cli", actorId: "cli", surface: "cli", requestId: null, targets: [{ type: "identity", id, name: "audit-cli-user" }] },
    ]);
  });
});

describe("an identity deleted between its lookup and the change", () => {
  it("is not found by updateIdentity and updateIdentityByRef, and nothing is written or recorded", async ({ h, t }) => {
    const owner = trustedCaller({ kind: "cli", id: "cli", name: "keyhaven cli" }, t.workspaceId, { surface: "cli" });
    for (const [i, update] of [
      (services: typeof h.services, id: string) =>
        updateIdentity(services, owner, { identityId: id, environment: "default", meta: {} }, V1_IDENTITY_RULES),
      (services: typeof h.services, id: string) => updateIdentityByRef(services, owner, { identity: id, meta: {} }, V1_IDENTITY_RULES),
    ].entries()) {
      const id = await createIdentity(h.services, owner, { externalId: `audit-raced-${i}` }, V1_IDENTITY_RULES);
      // The gate of this call deletes the identity (on the store's own connection) before its transaction opens.
      const services = Object.assign({}, h.services, { changes: new DeletingGate(h, id) });
      await expect(update(services, id)).rejects.toThrow(NotFoundError);
      const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "identity.update" });
      expect(entries.filter((e) => e.targets.some((target) => target.id === id))).toEqual([]);
    }
  });
});

/** A write gate that deletes an identity first, as a concurrent request might between a lookup and the change. */
class DeletingGate extends WriteGate {
  constructor(
    private readonly h: Harness,
    private readonly identityId: string,
  ) {
    super(h.services.db, h.services.clock);
  }

  override async change<T>(caller: Caller, work: (tx: Db, record: RecordChange) => Promise<T>): Promise<T> {
    await this.h.sql(`delete from identities where id = '${this.identityId}'`);
    return super.change(caller, work);
  }
}
