import { createHash, randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { WriteGate } from "../src/core/changes.js";
import { importKeys } from "../src/core/import/import.keys.js";
import { PreconditionFailedError } from "../src/errors.js";
import type { Db } from "../src/storage/client.js";
import { apiErrorOf } from "../src/wire/v1/errors.js";
import { callerOf } from "./caller-of.js";
import { test } from "./fixtures.js";

// Issue 34 §1: a role deleted while migrations.createKeys runs, between the checks of the request and the
// transaction that writes its keys. The interleaving is forced: the import runs on a handle that deletes the role
// (on the harness's own connection, as a concurrent request would) just before its first transaction begins.

const newHash = () => createHash("sha256").update(randomBytes(16)).digest("base64");

/** `db`, except that `beforeFirstTransaction` runs (awaited) just before its first transaction begins. */
function withHookBeforeFirstTransaction(db: Db, beforeFirstTransaction: () => Promise<unknown>): Db {
  let fired = false;
  return new Proxy(db, {
    get(target, prop) {
      const real = Reflect.get(target, prop, target);
      if (prop === "transaction" && !fired) {
        return async (...args: unknown[]) => {
          fired = true;
          await beforeFirstTransaction();
          return (real as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof real === "function" ? real.bind(target) : real;
    },
  });
}

/**
 * `db`, except that `insideWriteTransaction` runs (awaited) inside its first transaction, just before that
 * transaction's first raw statement (insertImport's insert of the keys, by insertRecordset; the names are resolved
 * by the query builder's selects): after the names were resolved, before the keys are inserted. (It hooked the
 * first savepoint while insertImport opened one; in the write gate's transaction it opens none.)
 */
function withHookInsideFirstTransaction(db: Db, insideWriteTransaction: () => Promise<unknown>): Db {
  const bound = <T extends object>(target: T, prop: string | symbol) => {
    const real = Reflect.get(target, prop, target);
    return typeof real === "function" ? real.bind(target) : real;
  };
  let fired = false;
  return new Proxy(db, {
    get(target, prop) {
      if (prop !== "transaction") return bound(target, prop);
      return (fn: (tx: Db) => Promise<unknown>, ...rest: unknown[]) =>
        (target.transaction as (...a: unknown[]) => Promise<unknown>).call(
          target,
          (tx: Db) =>
            fn(
              new Proxy(tx, {
                get(txTarget, txProp) {
                  if (txProp !== "execute" || fired) return bound(txTarget, txProp);
                  return async (...args: unknown[]) => {
                    fired = true;
                    await insideWriteTransaction();
                    return (txTarget.execute as (...a: unknown[]) => Promise<unknown>).apply(txTarget, args);
                  };
                },
              }),
            ),
          ...rest,
        );
    },
  });
}

describe("migrations.createKeys and a concurrent delete of a role it names", () => {
  test("a role deleted between the request's checks and its write is a 412 naming the role, never a 500; nothing is written", async ({
    h,
    t,
    apiId,
    createRole,
  }) => {
    const name = `race_${randomBytes(4).toString("hex")}`;
    const roleId = await createRole(name);
    const db = withHookBeforeFirstTransaction(h.db, () => h.post("/v1/permissions.deleteRole", { roleId }, t.rootKey));
    const principal = { workspaceId: t.workspaceId, permissions: new Set(["*"]) };
    const hash = newHash();
    const err = await importKeys(
      { db, keyring: h.keyring, statistics: { onImported: () => {} }, changes: new WriteGate(db, h.clock) },
      callerOf(principal),
      [{ apiId, hash: { value: hash, variant: "sha256_base64" }, roles: [name] }],
      h.clock.now(),
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PreconditionFailedError);
    expect((err as PreconditionFailedError).refusal).toEqual({ kind: "importRolesMissing", names: [name] });
    const answer = apiErrorOf(err as PreconditionFailedError);
    expect([answer.status, answer.code]).toEqual([412, "PRECONDITION_FAILED"]);
    expect(await h.sql(`select id from roles where id = '${roleId}'`)).toEqual([]);
    expect(await h.sql(`select id from keys where hash = '${hash}'`)).toEqual([]);
  });

  // On PGlite nothing runs beside a transaction: this interleaving exists on PostgreSQL only.
  test.skipIf(!process.env.TEST_DATABASE_URL)(
    "a role deleted after the import resolved it waits for the import's commit, then removes the new key's link with it",
    async ({ h, t, apiId, createRole }) => {
      const name = `race_${randomBytes(4).toString("hex")}`;
      const roleId = await createRole(name);
      let deletion: Promise<unknown> | undefined;
      const db = withHookInsideFirstTransaction(h.db, async () => {
        deletion = h.post("/v1/permissions.deleteRole", { roleId }, t.rootKey);
        // The delete has reached PostgreSQL and waits for the import's lock on the role.
        await expect
          .poll(
            async () =>
              (
                await h.sql<{ n: string }>(
                  `select count(*) as n from pg_stat_activity where wait_event_type = 'Lock' and query ilike 'delete from "roles"%'`,
                )
              )[0]!.n,
            { timeout: 20_000 },
          )
          .toBe("1");
      });
      const principal = { workspaceId: t.workspaceId, permissions: new Set(["*"]) };
      const [keyId] = await importKeys(
        { db, keyring: h.keyring, statistics: { onImported: () => {} }, changes: new WriteGate(db, h.clock) },
        callerOf(principal),
        [{ apiId, hash: { value: newHash(), variant: "sha256_base64" }, roles: [name] }],
        h.clock.now(),
      );
      expect(deletion).toBeDefined();
      expect((await deletion) as { status: number }).toMatchObject({ status: 200 });
      expect(await h.sql(`select id from keys where id = '${keyId}'`)).toEqual([{ id: keyId }]);
      expect(await h.sql(`select role_id from keys_roles where key_id = '${keyId}'`)).toEqual([]);
      expect(await h.sql(`select id from roles where id = '${roleId}'`)).toEqual([]);
    },
  );
});
