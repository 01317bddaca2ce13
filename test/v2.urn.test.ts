import { describe, expect } from "vitest";
import { callRoute, test } from "./fixtures.js";
import type { Harness, Response, Tenant } from "./helper.js";

/**
 * Issue 14: v2's URN root-key permissions (`unkey:v1:<ws>:<path>#<action>`, contract §1.5) on every v2 route whose
 * row of contract §2 names a URN form. Per route: a root key holding only the URN grant (exact, or a covering
 * pattern with `*`/`**`) is accepted; the URN of another workspace, of another keyspace or of another action is
 * refused as the route refuses a missing permission; the same grants on the v1 route grant nothing.
 */

let n = 0;
const unique = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${++n}`;

/** What a case's request and grants are made of: a fresh key (and API) and identity of `t`'s workspace. */
type Ctx = { ws: string; apiId: string; keyId: string; key: string; identityId: string; externalId: string };

const urn = (ws: string, path: string, action: string) => `unkey:v1:${ws}:${path}#${action}`;

type Case = {
  route: string;
  body(c: Ctx): unknown;
  /** Root-key grants that suffice: the exact URN(s) the contract names, and covering patterns. */
  accepted(c: Ctx): string[][];
  /** Grants that do not: another workspace's, another keyspace's, another action's. */
  refused(c: Ctx): string[][];
  /** How a refusal looks: v2's 403 or 404, or verifyKey's 200 NOT_FOUND. */
  denied: 403 | 404 | "NOT_FOUND";
  /** The v1 route doing the same, which the same URN grants must not open (403). */
  v1?: { path: string; input(c: Ctx): unknown };
};

/** The grants of a key-scoped URN route (`keyspaces/<A>/keys/<K>#action`). */
const onKey = (action: string) => ({
  accepted: (c: Ctx) => [
    [urn(c.ws, `keyspaces/${c.apiId}/keys/${c.keyId}`, action)],
    [urn(c.ws, "keyspaces/*/keys/*", action)],
    [urn(c.ws, `keyspaces/${c.apiId}/**`, action)],
    [urn(c.ws, "**", "*")],
  ],
  refused: (c: Ctx) => [
    [urn("ws_other", `keyspaces/${c.apiId}/keys/${c.keyId}`, action)],
    [urn("ws_other", "**", "*")],
    [urn(c.ws, `keyspaces/api_other/keys/${c.keyId}`, action)],
    [urn(c.ws, `keyspaces/${c.apiId}/keys/key_other`, action)],
    [urn(c.ws, `keyspaces/${c.apiId}/keys/${c.keyId}`, action === "read_key" ? "update_key" : "read_key")],
    [`api.api_other.${action}`],
  ],
});

/** The grants of a keyspace-scoped URN route (`keyspaces/<A>#action`). */
const onKeyspace = (action: string) => ({
  accepted: (c: Ctx) => [[urn(c.ws, `keyspaces/${c.apiId}`, action)], [urn(c.ws, "keyspaces/*", action)], [urn(c.ws, "**", "*")]],
  refused: (c: Ctx) => [
    [urn("ws_other", `keyspaces/${c.apiId}`, action)],
    [urn(c.ws, "keyspaces/api_other", action)],
    // A grant on the keyspace's keys is not one on the keyspace.
    [urn(c.ws, `keyspaces/${c.apiId}/keys/*`, action)],
    [urn(c.ws, `keyspaces/${c.apiId}`, "read_key")],
  ],
});

/** The grants of an identity route (`projects/*\/identities/*#action`, any identity of any project). */
const onIdentities = (action: string) => ({
  accepted: (c: Ctx) => [[urn(c.ws, "projects/*/identities/*", action)], [urn(c.ws, "projects/**", action)], [urn(c.ws, "**", "*")]],
  refused: (c: Ctx) => [
    [urn("ws_other", "projects/*/identities/*", action)],
    [urn(c.ws, "projects/*/identities/*", action === "read_identity" ? "update_identity" : "read_identity")],
    // The required path names any identity: a concrete id does not cover it.
    [urn(c.ws, `projects/p_1/identities/${c.identityId}`, action)],
    [urn(c.ws, `keyspaces/${c.apiId}/**`, action)],
  ],
});

const cases: Case[] = [
  {
    route: "keys.getKey",
    body: (c) => ({ keyId: c.keyId }),
    ...onKey("read_key"),
    denied: 403,
    v1: { path: "/v1/keys.getKey", input: (c) => ({ keyId: c.keyId }) },
  },
  {
    route: "keys.whoami",
    body: (c) => ({ key: c.key }),
    ...onKey("read_key"),
    denied: 404,
    v1: { path: "/v1/keys.whoami", input: (c) => ({ key: c.key }) },
  },
  {
    route: "keys.updateKey",
    body: (c) => ({ keyId: c.keyId, name: "renamed" }),
    ...onKey("update_key"),
    denied: 403,
    v1: { path: "/v1/keys.updateKey", input: (c) => ({ keyId: c.keyId, name: "renamed" }) },
  },
  {
    route: "keys.updateCredits",
    body: (c) => ({ keyId: c.keyId, operation: "set", value: 5 }),
    ...onKey("update_key"),
    denied: 403,
    v1: { path: "/v1/keys.updateRemaining", input: (c) => ({ keyId: c.keyId, op: "set", value: 5 }) },
  },
  {
    route: "keys.deleteKey",
    body: (c) => ({ keyId: c.keyId }),
    ...onKey("delete_key"),
    denied: 403,
    v1: { path: "/v1/keys.deleteKey", input: (c) => ({ keyId: c.keyId }) },
  },
  {
    route: "keys.verifyKey",
    body: (c) => ({ key: c.key }),
    ...onKey("verify_key"),
    denied: "NOT_FOUND",
  },
  {
    route: "keys.createKey",
    body: (c) => ({ apiId: c.apiId }),
    ...onKeyspace("create_key"),
    denied: 404, // masked as a missing API (contract §2 row 6)
    v1: { path: "/v1/keys.createKey", input: (c) => ({ apiId: c.apiId }) },
  },
  {
    route: "keys.rerollKey",
    body: (c) => ({ keyId: c.keyId, expiration: 0 }),
    ...onKeyspace("create_key"),
    denied: 403,
  },
  {
    route: "apis.listKeys",
    body: (c) => ({ apiId: c.apiId }),
    accepted: (c) => [
      [urn(c.ws, `keyspaces/${c.apiId}/keys/*`, "read_key"), urn(c.ws, `keyspaces/${c.apiId}`, "read_keyspace")],
      [urn(c.ws, "keyspaces/*/keys/*", "read_key"), urn(c.ws, "keyspaces/*", "read_keyspace")],
      [urn(c.ws, "**", "*")],
    ],
    refused: (c) => [
      // Both URNs are needed; a concrete key's read_key is not "any key of the keyspace".
      [urn(c.ws, `keyspaces/${c.apiId}/keys/*`, "read_key")],
      [urn(c.ws, `keyspaces/${c.apiId}`, "read_keyspace")],
      [urn(c.ws, `keyspaces/${c.apiId}/keys/${c.keyId}`, "read_key"), urn(c.ws, `keyspaces/${c.apiId}`, "read_keyspace")],
      [urn("ws_other", "**", "*")],
      [urn(c.ws, "keyspaces/api_other/keys/*", "read_key"), urn(c.ws, "keyspaces/api_other", "read_keyspace")],
    ],
    denied: 404,
    v1: { path: "/v1/apis.listKeys", input: (c) => ({ apiId: c.apiId }) },
  },
  {
    route: "identities.createIdentity",
    body: () => ({ externalId: unique("ext") }),
    ...onIdentities("create_identity"),
    denied: 403,
    v1: { path: "/v1/identities.createIdentity", input: () => ({ externalId: unique("ext") }) },
  },
  {
    route: "identities.getIdentity",
    body: (c) => ({ identity: c.identityId }),
    ...onIdentities("read_identity"),
    denied: 403,
    v1: { path: "/v1/identities.getIdentity", input: (c) => ({ identityId: c.identityId }) },
  },
  {
    route: "identities.listIdentities",
    body: () => ({}),
    ...onIdentities("read_identity"),
    denied: 403,
  },
  {
    route: "identities.updateIdentity",
    body: (c) => ({ identity: c.identityId, meta: { a: 1 } }),
    ...onIdentities("update_identity"),
    denied: 403,
    v1: { path: "/v1/identities.updateIdentity", input: (c) => ({ identityId: c.identityId, meta: { a: 1 } }) },
  },
  {
    route: "identities.deleteIdentity",
    body: (c) => ({ identity: c.identityId }),
    ...onIdentities("delete_identity"),
    denied: 403,
    v1: { path: "/v1/identities.deleteIdentity", input: (c) => ({ identityId: c.identityId }) },
  },
];

/** A key of a fresh API and an identity of `t`'s workspace, made with its `*` root key. */
async function fresh(h: Harness, t: Tenant, apiId: string): Promise<Ctx> {
  // Created (not imported): a key without an encrypted copy, which rerollKey would also ask encrypt_key for.
  const created = await h.post("/v1/keys.createKey", { apiId }, t.rootKey);
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const { key, keyId } = created.body as { key: string; keyId: string };
  const externalId = unique("ext");
  const res = await h.post("/v2/identities.createIdentity", { externalId }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ws: t.workspaceId, apiId, keyId, key, identityId: res.body.data.identityId, externalId };
}

function expectAccepted(res: Response, what: string) {
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(200);
  if (what.startsWith("keys.verifyKey")) expect(res.body.data.code, what).toBe("VALID");
}

function expectDenied(res: Response, denied: Case["denied"], what: string) {
  if (denied === "NOT_FOUND") {
    expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(200);
    expect(res.body.data, what).toMatchObject({ valid: false, code: "NOT_FOUND" });
    return;
  }
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(denied);
  if (denied === 403) expect(res.body.error.type).toBe("https://unkey.com/docs/errors/unkey/authorization/insufficient_permissions");
}

describe("v2 URN root-key permissions (Issue 14, contract §1.5)", () => {
  for (const c of cases) {
    test(`${c.route}: the URN the contract names suffices, exact or covered; others' and other resources' do not`, async ({ h, t }) => {
      const apiId = await h.createApi(t);
      const probe = await fresh(h, t, apiId);
      for (let i = 0; i < c.accepted(probe).length; i++) {
        // A fresh key and identity per grant (a delete or reroll uses one up), the grant made for them.
        const ctx = await fresh(h, t, apiId);
        const mine = c.accepted(ctx)[i]!;
        const rootKey = await h.rootKey(t.workspaceId, mine);
        expectAccepted(await h.post(`/v2/${c.route}`, c.body(ctx), rootKey), `${c.route} with ${mine.join(", ")}`);
      }
      for (const grants of c.refused(probe)) {
        const rootKey = await h.rootKey(t.workspaceId, grants);
        const res = await h.post(`/v2/${c.route}`, c.body(probe), rootKey);
        expectDenied(res, c.denied, `${c.route} with ${grants.join(", ")}`);
        // A refusal never echoes what the root key holds.
        if (res.body.error) for (const g of grants) expect(res.body.error.detail ?? "").not.toContain(g);
      }
    });
  }

  for (const c of cases.filter((x) => x.v1 !== undefined)) {
    test(`${c.v1!.path}: the same URN grants grant nothing on v1 (403)`, async ({ h, t }) => {
      const apiId = await h.createApi(t);
      const ctx = await fresh(h, t, apiId);
      const rootKey = await h.rootKey(t.workspaceId, c.accepted(ctx).flat());
      const res = await callRoute(h, c.v1!.path, c.v1!.input(ctx), rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(403);
      expect(res.body.error.code).toBe("INSUFFICIENT_PERMISSIONS");
    });
  }

  test("decrypt: getKey with the key's URN decrypt_key, listKeys with any key's, return the plaintext; v1 does not", async ({ h, t }) => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const created = await h.post("/v1/keys.createKey", { apiId, recoverable: true }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { key, keyId } = created.body as { key: string; keyId: string };
    const ws = t.workspaceId;
    const reader = await h.rootKey(ws, [
      urn(ws, `keyspaces/${apiId}/keys/${keyId}`, "read_key"),
      urn(ws, `keyspaces/${apiId}/keys/${keyId}`, "decrypt_key"),
    ]);
    const got = await h.post("/v2/keys.getKey", { keyId, decrypt: true }, reader);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.data.plaintext).toBe(key);
    // listKeys asks for decrypt_key on any key of the keyspace: the one key's URN is not that.
    const listRead = [urn(ws, `keyspaces/${apiId}/keys/*`, "read_key"), urn(ws, `keyspaces/${apiId}`, "read_keyspace")];
    const oneKeyDecrypt = await h.rootKey(ws, [...listRead, urn(ws, `keyspaces/${apiId}/keys/${keyId}`, "decrypt_key")]);
    expect((await h.post("/v2/apis.listKeys", { apiId, decrypt: true }, oneKeyDecrypt)).status).toBe(403);
    const lister = await h.rootKey(ws, [...listRead, urn(ws, `keyspaces/${apiId}/keys/*`, "decrypt_key")]);
    const listed = await h.post("/v2/apis.listKeys", { apiId, decrypt: true }, lister);
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.data.find((k: { keyId: string }) => k.keyId === keyId)?.plaintext).toBe(key);
    // Without decrypt_key in any form, v2 refuses decrypt (403).
    const noDecrypt = await h.rootKey(ws, [urn(ws, `keyspaces/${apiId}/keys/${keyId}`, "read_key")]);
    expect((await h.post("/v2/keys.getKey", { keyId, decrypt: true }, noDecrypt)).status).toBe(403);
    // v1's getKey with the same grants: 403.
    expect((await callRoute(h, "/v1/keys.getKey", { keyId, decrypt: "true" }, reader)).status).toBe(403);
  });

  test("createKey recoverable and rerollKey of a recoverable key need encrypt_key on any key of the keyspace (URN)", async ({ h, t }) => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const ws = t.workspaceId;
    const create = urn(ws, `keyspaces/${apiId}`, "create_key");
    const encrypt = urn(ws, `keyspaces/${apiId}/keys/*`, "encrypt_key");
    const withoutEncrypt = await h.rootKey(ws, [create]);
    // createKey masks the refusal as a missing API (404), rerollKey answers 403.
    expect((await h.post("/v2/keys.createKey", { apiId, recoverable: true }, withoutEncrypt)).status).toBe(404);
    const both = await h.rootKey(ws, [create, encrypt]);
    const created = await h.post("/v2/keys.createKey", { apiId, recoverable: true }, both);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { keyId } = created.body.data as { keyId: string };
    expect((await h.post("/v2/keys.rerollKey", { keyId, expiration: 0 }, withoutEncrypt)).status).toBe(403);
    expect((await h.post("/v2/keys.rerollKey", { keyId, expiration: 0 }, both)).status).toBe(200);
  });

  test("a key or identity of another workspace is not found, whatever URN of it the root key holds", async ({ h, t }) => {
    const other = await h.tenant();
    const theirApi = await h.createApi(other);
    const theirs = await fresh(h, other, theirApi);
    const all = await h.rootKey(t.workspaceId, [urn(t.workspaceId, "**", "*"), urn(other.workspaceId, "**", "*")]);
    expect((await h.post("/v2/keys.getKey", { keyId: theirs.keyId }, all)).status).toBe(404);
    expect((await h.post("/v2/identities.getIdentity", { identity: theirs.identityId }, all)).status).toBe(404);
    expect((await h.post("/v2/apis.listKeys", { apiId: theirApi }, all)).status).toBe(404);
    const verified = await h.post("/v2/keys.verifyKey", { key: theirs.key }, all);
    expect(verified.body.data).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });
});
