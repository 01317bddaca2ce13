import { describe, expect } from "vitest";
import { type CreateKeyCommand, createKey as createKeyCore, V1_CREATE_KEY_RULES } from "../src/core/keys/keys.create.js";
import { decryptKeyRows, requireDecryptPermission } from "../src/core/keys/keys.decrypt.js";
import { deleteApiKeys, deleteKey } from "../src/core/keys/keys.delete.js";
import { type UpdateKeyCommand, updateKey as updateKeyCore, V1_UPDATE_KEY_RULES } from "../src/core/keys/keys.update.js";
import { updateRemaining } from "../src/core/keys/keys.updateRemaining.js";
import { type Caller, rootKeyCaller, withAccess } from "../src/core/caller.js";
import { keyspaceUrn } from "../src/core/auth/permissions.query.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";
import { V2_ACCESS } from "../src/wire/v2/caller.js";
import { DecryptNotAllowedError, InvalidInputError, NotFoundError, PermissionDeniedError, PreconditionFailedError } from "../src/errors.js";
import { test } from "./fixtures.js";
import type { Harness } from "./helper.js";
import { domainRejection, v1Words } from "./v1-words.js";

// The key operations of the core, called directly on the harness's services: plain inputs, plain results, domain
// errors; no HTTP, no v1 field names, no envelope.

// v1's rules, as v1's handlers pass them.
const createKey = (services: Harness["services"], caller: Caller, input: CreateKeyCommand) =>
  createKeyCore(services, caller, input, V1_CREATE_KEY_RULES);
const updateKey = (services: Harness["services"], caller: Caller, input: UpdateKeyCommand) =>
  updateKeyCore(services, caller, input, V1_UPDATE_KEY_RULES);

const principalOf = (workspaceId: string, permissions: string[] = ["*"]): Caller =>
  rootKeyCaller({ rootKeyId: "rk_core_test", workspaceId, permissions: new Set(permissions) }, V1_ACCESS, { surface: "v1" });

describe("core/keys", () => {
  test("creates, updates, changes the remaining uses of and deletes a key without HTTP", async ({ h, t, apiId }) => {
    const principal = principalOf(t.workspaceId);
    const created = await createKey(h.services, principal, {
      apiId,
      prefix: "core",
      externalId: "customer-1",
      remaining: 5,
      refill: { interval: "monthly", amount: 5 },
      ratelimit: { limit: 10, duration: 60_000 },
      roles: ["core-role"],
    });
    expect(created.key).toMatch(/^core_/);
    const [row] = await h.sql<any>(`select * from keys where id = '${created.keyId}'`);
    expect(row).toMatchObject({
      start: created.key.slice(0, 9),
      owner_id: "customer-1",
      remaining_requests: 5,
      refill_day: 1,
      refill_amount: 5,
    });
    expect(row.identity_id).not.toBeNull();

    await updateKey(h.services, principal, { keyId: created.keyId, name: "renamed", externalId: null, expires: null, ratelimit: null });
    const [updated] = await h.sql<any>(`select name, owner_id, identity_id, expires from keys where id = '${created.keyId}'`);
    expect(updated).toMatchObject({ name: "renamed", owner_id: null, identity_id: null, expires: null });
    expect(await h.sql(`select 1 from ratelimits where key_id = '${created.keyId}'`)).toHaveLength(0);

    expect(await updateRemaining(h.services, principal, { keyId: created.keyId, op: "increment", value: 3 })).toEqual({ remaining: 8 });
    expect(await updateRemaining(h.services, principal, { keyId: created.keyId, op: "set", value: null })).toEqual({ remaining: null });

    await deleteKey(h.services, principal, { keyId: created.keyId, permanent: true });
    expect(await h.sql(`select 1 from keys where id = '${created.keyId}'`)).toHaveLength(0);
  });

  test("refuses with domain errors, by kind and facts; v1 words them as clients see them", async ({ h, t, apiId }) => {
    const principal = principalOf(t.workspaceId);
    const notPositive = await domainRejection(createKey(h.services, principal, { apiId, remaining: 0 }));
    expect(notPositive).toBeInstanceOf(InvalidInputError);
    expect(notPositive.refusal).toEqual({ kind: "remainingNotPositive" });
    expect(v1Words(notPositive)).toBe("remaining must be greater than 0.");
    const refillUnlimited = await domainRejection(createKey(h.services, principal, { apiId, refill: { interval: "daily", amount: 1 } }));
    expect(refillUnlimited).toBeInstanceOf(InvalidInputError);
    expect(refillUnlimited.refusal).toEqual({ kind: "refillOnUnlimited", during: "create" });
    expect(v1Words(refillUnlimited)).toBe("remaining must be set if you are using refill.");
    await expect(createKey(h.services, principal, { apiId: "api_missing" })).rejects.toBeInstanceOf(NotFoundError);
    const notRecoverable = await domainRejection(createKey(h.services, principal, { apiId, recoverable: true }));
    expect(notRecoverable).toBeInstanceOf(PreconditionFailedError);
    expect(notRecoverable).toMatchObject({ what: "api", refusal: { kind: "recoverableNotSupported", apiId } });
    expect(v1Words(notRecoverable)).toBe(`api ${apiId} does not support recoverable keys`);
    const readOnly = principalOf(t.workspaceId, [`api.${apiId}.create_key`]);
    const refused = await domainRejection(createKey(h.services, readOnly, { apiId, roles: ["never-created-role"] }));
    expect(refused).toBeInstanceOf(PermissionDeniedError);
    expect(refused.refusal).toEqual({ kind: "createMissingRoles", names: ["never-created-role"] });
    expect(v1Words(refused)).toContain(
      'roles ["never-created-role"] do not exist; creating them needs one of the permissions "*" or "rbac.*.create_role"',
    );
    await expect(createKey(h.services, principalOf(t.workspaceId, []), { apiId })).rejects.toBeInstanceOf(PermissionDeniedError);

    const { keyId } = await createKey(h.services, principal, { apiId });
    const unlimited = await domainRejection(updateRemaining(h.services, principal, { keyId, op: "decrement", value: 1 }));
    expect(unlimited).toBeInstanceOf(InvalidInputError);
    expect(unlimited.refusal).toEqual({ kind: "remainingUnlimited", op: "decrement" });
    expect(v1Words(unlimited)).toBe("cannot decrement a key with unlimited remaining requests, please 'set' a value instead.");
    const refillOnUnlimited = await domainRejection(updateKey(h.services, principal, { keyId, refill: { interval: "daily", amount: 1 } }));
    expect(refillOnUnlimited).toBeInstanceOf(InvalidInputError);
    expect(refillOnUnlimited.refusal).toEqual({ kind: "refillOnUnlimited", during: "update" });
    expect(v1Words(refillOnUnlimited)).toBe("Cannot set refill on a key with unlimited requests");
    // Another workspace's key is a missing one.
    const other = await h.tenant();
    await expect(deleteKey(h.services, principalOf(other.workspaceId), { keyId, permanent: false })).rejects.toThrow(
      new NotFoundError("key", keyId),
    );
    const otherKey = await domainRejection(deleteKey(h.services, principalOf(other.workspaceId), { keyId, permanent: false }));
    expect(otherKey.refusal).toEqual({ kind: "notFound", what: "key", id: keyId });
    expect(v1Words(otherKey)).toBe(`key ${keyId} not found`);
    await expect(deleteApiKeys(h.services, principalOf(other.workspaceId), { apiId, permanent: false })).rejects.toThrow(
      new NotFoundError("api", apiId),
    );
  });

  test("reading a plaintext needs decrypt_key, and the keyring it was sealed with", async ({ h, t, apiId }) => {
    expect(() => requireDecryptPermission(principalOf(t.workspaceId, [`api.${apiId}.read_key`]), apiId)).toThrow(DecryptNotAllowedError);
    expect(() => requireDecryptPermission(principalOf(t.workspaceId, [`api.${apiId}.decrypt_key`]), apiId)).not.toThrow();
    // The key's URN grants decrypt_key only to a caller whose access policy counts URN grants (v2's), never by default.
    const urn = keyspaceUrn(t.workspaceId, apiId, "*", "decrypt_key");
    expect(() => requireDecryptPermission(principalOf(t.workspaceId, [urn]), apiId)).toThrow(DecryptNotAllowedError);
    expect(() => requireDecryptPermission(withAccess(principalOf(t.workspaceId, [urn]), V2_ACCESS), apiId)).not.toThrow();
    // Rows without an encrypted copy need no keyring.
    const row = { id: "key_x", workspaceId: t.workspaceId, encrypted: null, encryptionKeyId: null };
    expect(await decryptKeyRows(h.db, h.keyring, [row])).toEqual(new Map());
  });
});
