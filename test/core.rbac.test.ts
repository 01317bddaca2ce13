import { V1_KEY_LINKS } from "../src/wire/v1/keys/keys.rbac.rules.js";
import { callerOf } from "./caller-of.js";
import { describe, expect } from "vitest";
import { addToKey, removeFromKey, roleKind, setOnKey } from "../src/core/rbac/rbac.keyLinks.js";
import { NotFoundError, PermissionDeniedError } from "../src/errors.js";
import { apiErrorOf } from "../src/wire/v1/errors.js";
import { test as it } from "./fixtures.js";
import { v1WordsOfRejection } from "./v1-words.js";

// The rules of connecting roles to a key, called directly with a plain principal (no root key, no HTTP): domain
// errors out, and v1's choice of code for them made by apiErrorOf alone.

const principalOf = (workspaceId: string, ...permissions: string[]) => ({ workspaceId, permissions: new Set(permissions) });

describe("core rbac: roles on a key", () => {
  it("adds, sets and removes with a plain principal", async ({ h, t, importKey, createRole, keyRoles }) => {
    const { keyId } = await importKey();
    const roleId = await createRole("core-rbac-a");
    const all = principalOf(t.workspaceId, "*");
    expect(await addToKey(h.services, callerOf(all), roleKind, { keyId, wanted: [{ name: "core-rbac-a" }] }, V1_KEY_LINKS)).toEqual([
      { id: roleId, name: "core-rbac-a" },
    ]);
    expect(await keyRoles(keyId)).toEqual([roleId]);
    const created = await setOnKey(
      h.services,
      callerOf(all),
      roleKind,
      { keyId, wanted: [{ name: "core-rbac-b", create: true }] },
      V1_KEY_LINKS,
    );
    expect(created.map((c) => c.name)).toEqual(["core-rbac-b"]);
    expect(await keyRoles(keyId)).toEqual([created[0]!.id]);
    await removeFromKey(h.services, callerOf(all), roleKind, { keyId, wanted: [{ name: "core-rbac-b" }] }, V1_KEY_LINKS);
    expect(await keyRoles(keyId)).toEqual([]);
  });

  it("throws NotFoundError for a key outside the principal's workspace", async ({ h, importKey }) => {
    const { keyId } = await importKey();
    const other = await h.tenant();
    const add = addToKey(
      h.services,
      callerOf(principalOf(other.workspaceId, "*")),
      roleKind,
      { keyId, wanted: [{ name: "x" }] },
      V1_KEY_LINKS,
    );
    await expect(add).rejects.toBeInstanceOf(NotFoundError);
    expect(await v1WordsOfRejection(add)).toContain(`key ${keyId} not found`);
  });

  it("says which check refused, and v1 answers those two UNAUTHORIZED", async ({ h, t, importKey, createRole }) => {
    const { keyId } = await importKey();
    await createRole("core-rbac-kept");
    const adder = principalOf(t.workspaceId, "rbac.*.add_role_to_key");
    const creating = await addToKey(
      h.services,
      callerOf(adder),
      roleKind,
      { keyId, wanted: [{ name: "core-rbac-new", create: true }] },
      V1_KEY_LINKS,
    ).catch((e: unknown) => e);
    expect(creating).toBeInstanceOf(PermissionDeniedError);
    expect((creating as PermissionDeniedError).check).toBe("createWhileAdding");
    expect(apiErrorOf(creating as PermissionDeniedError).code).toBe("UNAUTHORIZED");

    await addToKey(h.services, callerOf(adder), roleKind, { keyId, wanted: [{ name: "core-rbac-kept" }] }, V1_KEY_LINKS);
    const disconnecting = await setOnKey(h.services, callerOf(adder), roleKind, { keyId, wanted: [] }, V1_KEY_LINKS).catch(
      (e: unknown) => e,
    );
    expect(disconnecting).toBeInstanceOf(PermissionDeniedError);
    expect((disconnecting as PermissionDeniedError).check).toBe("disconnectWhileSetting");
    expect(apiErrorOf(disconnecting as PermissionDeniedError).code).toBe("UNAUTHORIZED");

    const nothing = await removeFromKey(
      h.services,
      callerOf(adder),
      roleKind,
      { keyId, wanted: [{ name: "core-rbac-kept" }] },
      V1_KEY_LINKS,
    ).catch((e: unknown) => e);
    expect(nothing).toBeInstanceOf(PermissionDeniedError);
    expect((nothing as PermissionDeniedError).check).toBeUndefined();
    expect(apiErrorOf(nothing as PermissionDeniedError).code).toBe("INSUFFICIENT_PERMISSIONS");
  });
});
