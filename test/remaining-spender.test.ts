import { randomBytes } from "node:crypto";
import net from "node:net";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { describe, expect } from "vitest";
import { MAX_SPENDS_PER_STATEMENT, prepareSpendStatements, spendRemaining } from "../src/storage/keys/keys.repository.js";
import { RemainingSpender, SPEND_OVERLAP_AFTER_MS } from "../src/storage/keys/remaining.spender.js";
import type { Db } from "../src/storage/client.js";
import * as schema from "../src/storage/schema.js";
import { test } from "./fixtures.js";
import { recordingDb } from "./recording-db.js";

// Spends of remaining uses across keys (src/storage/keys/remaining.spender.ts over keys.repository.ts
// spendRemaining): verifications that arrive together are spent together, whatever their keys, in one statement.
// Statements are counted by the spender (`statementsSent`: one per call of spendRemaining, which sends one statement).

const it = test
  .extend(
    "remainingOf",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`))[0]!.r,
  )
  .extend("newKeys", async ({ h, t, apiId }) => async (count: number, fields: Record<string, unknown>) => {
    const res = await h.post(
      "/v1/migrations.createKeys",
      Array.from({ length: count }, () => ({ apiId, plaintext: `sk_${randomBytes(16).toString("hex")}`, ...fields })),
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.keyIds as string[];
  });

const onPostgres = process.env.TEST_DATABASE_URL !== undefined;
const range = (from: number, to: number) => Array.from({ length: from - to + 1 }, (_, i) => from - i);
/**
 * The next turn of the event loop: the spender starts a statement in the check phase of the turn its spend arrived
 * in, so a spend made before this has a statement of its own, and spends made after it go into the next one.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("spending remaining uses across keys", () => {
  it("spends many keys verified at once in one statement, not one per key", async ({ h, newKeys, remainingOf }) => {
    const keyIds = await newKeys(40, { remaining: 3 });
    const spender = new RemainingSpender(h.db, 1);
    // Two verifications of each key, interleaved: key 0, key 1, …, key 39, key 0, key 1, …
    const results = await Promise.all([...keyIds, ...keyIds].map((keyId) => spender.spend(keyId, 1)));
    // All of them arrive in one turn of the event loop and go into one statement, the first one too (started at
    // once, it would go alone: on PGlite, which runs a statement on this thread, every spend would).
    expect(spender.statementsSent).toBe(1);
    // Each verification is answered with its own remainder, in arrival order per key.
    expect(results).toEqual([...keyIds.map(() => 2), ...keyIds.map(() => 1)]);
    for (const keyId of [keyIds[0]!, keyIds[39]!]) expect(await remainingOf(keyId)).toBe(1);
  });

  it("never overdraws any key under concurrent spends of many keys on two replicas", async ({ h, newKeys, remainingOf }) => {
    const keyIds = await newKeys(20, { remaining: 5 });
    // The replica has services of its own and, on PostgreSQL, its own connection pool, as another process has.
    const replica = await h.replica();
    try {
      const spenders = [h.services.remainingSpender, replica.services.remainingSpender, new RemainingSpender(h.db, 4)];
      const spends = Array.from({ length: 300 }, (_, i) => ({ keyId: keyIds[(i * 7) % 20]!, spender: spenders[i % 3]! }));
      const results = await Promise.all(spends.map((s) => s.spender.spend(s.keyId, 1)));
      for (const keyId of keyIds) {
        const granted = results.filter((r, i) => spends[i]!.keyId === keyId && r !== undefined) as number[];
        expect([...granted].sort((a, b) => b - a)).toEqual(range(4, 0));
        expect(await remainingOf(keyId)).toBe(0);
      }
    } finally {
      await replica.close();
    }
  });

  it("answers each verification of a hot key with its own remainder, in arrival order, with statements in parallel", async ({
    newKeys,
    h,
    remainingOf,
  }) => {
    const [hot] = await newKeys(1, { remaining: 100 });
    const others = await newKeys(10, { remaining: 100 });
    const spender = new RemainingSpender(h.db, 4);
    const hotSpends: Promise<number | undefined>[] = [];
    const otherSpends: Promise<number | undefined>[] = [];
    for (let i = 0; i < 50; i++) {
      hotSpends.push(spender.spend(hot!, 1));
      otherSpends.push(spender.spend(others[i % 10]!, 1));
    }
    expect(await Promise.all(hotSpends)).toEqual(range(99, 50));
    await Promise.all(otherSpends);
    expect(await remainingOf(hot!)).toBe(50);
    expect(await remainingOf(others[0]!)).toBe(95);
  });

  it("applies a due refill exactly once to every key of a batch", async ({ h, newKeys, backdate, remainingOf }) => {
    const keyIds = await newKeys(10, { remaining: 1, refill: { interval: "daily", amount: 4 } });
    await h.sql(`update keys set remaining_requests = 0 where id in (${keyIds.map((id) => `'${id}'`).join(",")})`);
    for (const keyId of keyIds) await backdate(keyId, 1);
    const spender = new RemainingSpender(h.db, 1);
    const spends = keyIds.flatMap((keyId) => Array.from({ length: 6 }, () => keyId));
    const results = await Promise.all(spends.map((keyId) => spender.spend(keyId, 1)));
    for (const keyId of keyIds) {
      const own = results.filter((_, i) => spends[i] === keyId);
      expect(own).toEqual([3, 2, 1, 0, undefined, undefined]);
      expect(await remainingOf(keyId)).toBe(0);
    }
    // Refilled today: the next verification finds nothing due.
    const [row] = await h.sql<{ due: number }>(
      `select count(*)::int as due from keys where id in (${keyIds.map((id) => `'${id}'`).join(",")})
       and last_refill_at < keyhaven_refill_boundary(refill_day, now())`,
    );
    expect(row!.due).toBe(0);
    expect(await spender.spend(keyIds[0]!, 1)).toBeUndefined();
  });

  it("applies a due refill once to a key spent at several costs in one statement", async ({ h, newKeys, backdate, remainingOf }) => {
    const [refilled, blocker] = await newKeys(2, { remaining: 1, refill: { interval: "daily", amount: 10 } });
    await h.sql(`update keys set remaining_requests = 0 where id = '${refilled}'`);
    await backdate(refilled!, 1);
    const spender = new RemainingSpender(h.db, 1);
    const first = spender.spend(blocker!, 0);
    await nextTurn();
    const results = Promise.all([3, 1, 3, 1].map((cost) => spender.spend(refilled!, cost)));
    await first;
    // Refilled to 10 once: cost 3 (10 → 7, 4), then cost 1 (4 → 3, 2).
    expect(await results).toEqual([7, 3, 4, 2]);
    expect(spender.statementsSent).toBe(2);
    expect(await remainingOf(refilled!)).toBe(2);
  });

  it("spends mixed costs of several keys in one statement, each key's groups on what the previous left", async ({
    h,
    newKeys,
    remainingOf,
  }) => {
    const [a, b, blocker] = await newKeys(3, { remaining: 10 });
    const spender = new RemainingSpender(h.db, 1);
    // The blocker's statement runs while the others arrive, so that they all go into the next one.
    const first = spender.spend(blocker!, 0);
    await nextTurn();
    const costsOfA = [3, 1, 3, 1, 0, 4];
    const ofA = costsOfA.map((cost) => spender.spend(a!, cost));
    const ofB = [2, 5, 2, 2].map((cost) => spender.spend(b!, cost));
    expect(await first).toBe(10);
    // a, grouped by cost in order of first arrival: cost 3 (10 → 7, 4), cost 1 (4 → 3, 2), cost 0 (2), cost 4 (refused).
    expect(await Promise.all(ofA)).toEqual([7, 3, 4, 2, 2, undefined]);
    // b: cost 2 (10 → 8, 6, 4), then cost 5 (4: refused).
    expect(await Promise.all(ofB)).toEqual([8, undefined, 6, 4]);
    expect(spender.statementsSent).toBe(2);
    expect(await remainingOf(a!)).toBe(2);
    expect(await remainingOf(b!)).toBe(4);
  });

  it("rejects the verifications of a failing statement, spends none of them, and serves the next ones", async ({
    h,
    newKeys,
    remainingOf,
  }) => {
    const [before, sharing, after] = await newKeys(3, { remaining: 10 });
    const spender = new RemainingSpender(h.db, 1);
    const first = spender.spend(before!, 1);
    await nextTurn();
    // A cost out of the database's integer range makes the whole next statement fail.
    const failing = spender.spend(after!, 2 ** 31);
    const sharingIt = spender.spend(sharing!, 1);
    expect(await first).toBe(9);
    await expect(failing).rejects.toThrow();
    await expect(sharingIt).rejects.toThrow();
    expect(await remainingOf(sharing!)).toBe(10);
    expect(await spender.spend(sharing!, 1)).toBe(9);
    expect(await spender.spend(after!, 1)).toBe(9);
  });

  it("reads a statement's groups from their JSON once", async ({ h, newKeys, remainingOf }) => {
    // Read at each of its two uses, the same JSON was sent twice and parsed twice: 8–15% of PostgreSQL's CPU per
    // statement of 23 groups (issue 13 §0).
    const [a, b] = await newKeys(2, { remaining: 5 });
    const { db, sent } = recordingDb(h);
    const results = await spendRemaining(prepareSpendStatements(db), [
      { keyId: a!, cost: 2, count: 1 },
      { keyId: b!, cost: 1, count: 3 },
    ]);
    expect(results).toEqual([
      { before: 5, granted: 1 },
      { before: 5, granted: 3 },
    ]);
    expect([await remainingOf(a!), await remainingOf(b!)]).toEqual([3, 2]);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.query.match(/jsonb_to_recordset/g)).toHaveLength(1);
    expect(sent[0]!.params).toHaveLength(1);
  });

  it("splits more groups than one statement takes into several statements", async ({ h }) => {
    const spender = new RemainingSpender(h.db, 1);
    const keyIds = Array.from({ length: MAX_SPENDS_PER_STATEMENT + 200 }, (_, i) => `key_missing_${i}`);
    const results = await Promise.all(keyIds.map((keyId) => spender.spend(keyId, 1)));
    expect(results.every((r) => r === undefined)).toBe(true);
    // 1,000 groups, then the 200 left.
    expect(spender.statementsSent).toBe(2);
    await expect(
      spendRemaining(
        prepareSpendStatements(h.db),
        keyIds.map((keyId) => ({ keyId, cost: 1, count: 1 })),
      ),
    ).rejects.toThrow(RangeError);
  });

  it("spends a conditional spend only while the epoch is no newer than its own, in every statement shape", async ({
    h,
    newKeys,
    remainingOf,
  }) => {
    const [a, b, c, blocker] = await newKeys(4, { remaining: 10 });
    const epoch = BigInt((await h.sql<{ e: string }>("select sum(value)::text as e from keyhaven_epoch"))[0]!.e);
    const spender = new RemainingSpender(h.db, 1);
    // One group alone (the one-key statement).
    expect(await spender.spendIfCurrent(a!, 1, epoch)).toEqual({ left: 9, had: 10 });
    expect(await spender.spendIfCurrent(a!, 1, epoch - 1n)).toBeUndefined();
    expect(await remainingOf(a!)).toBe(9);
    // Groups of distinct keys in one statement, conditional and not, current and stale.
    let first = spender.spend(blocker!, 0);
    await nextTurn();
    const distinct = [spender.spendIfCurrent(a!, 1, epoch), spender.spendIfCurrent(b!, 2, epoch - 1n), spender.spendAnswering(c!, 3)];
    await first;
    expect(await Promise.all(distinct)).toEqual([{ left: 8, had: 9 }, undefined, { left: 7, had: 10 }]);
    expect(spender.statementsSent).toBe(4);
    // Groups that share a key: the stale one is skipped, the others spend in order on what the previous left.
    first = spender.spend(blocker!, 0);
    await nextTurn();
    const sharing = [spender.spendIfCurrent(b!, 1, epoch), spender.spendIfCurrent(b!, 1, epoch - 1n), spender.spendAnswering(b!, 2)];
    await first;
    expect(await Promise.all(sharing)).toEqual([{ left: 9, had: 10 }, undefined, { left: 7, had: 9 }]);
    expect(spender.statementsSent).toBe(6);
    // A write that moves the epoch makes a spend conditional on the epoch before it spend nothing.
    await h.sql(`update keys set name = 'moved' where id = '${c}'`);
    expect(await spender.spendIfCurrent(c!, 1, epoch)).toBeUndefined();
    for (const [keyId, left] of [
      [a, 8],
      [b, 7],
      [c, 7],
    ] as const)
      expect(await remainingOf(keyId!)).toBe(left);
  });

  it("runs up to two statements at once, with a connection of the pool left for lookups on PostgreSQL", ({ h }) => {
    expect(h.services.config.databasePoolSize).toBeGreaterThan(2);
    expect(h.services.remainingSpender.inFlight).toBe(2);
    // On PostgreSQL the second only beside a statement that has run for a while; PGlite queues it at once.
    expect(h.services.remainingSpender.overlapAfterMs).toBe(h.onPostgres ? SPEND_OVERLAP_AFTER_MS : 0);
    // On PostgreSQL a statement's verifications are answered once the next statement is written (below); PGlite
    // would run the next statement first on this thread, so there they are answered at once.
    expect(h.services.remainingSpender.answerAfterNextStatement).toBe(h.onPostgres);
  });

  // The next statement runs in PostgreSQL's process, so it is written to the socket before this thread spends its
  // time answering the statement that ended (serialising and writing ~20 responses), not after.
  it.skipIf(!onPostgres)(
    "on PostgreSQL, writes the next statement before answering the verifications of the one that ended",
    async ({ h, newKeys }) => {
      const keyIds = await newKeys(61, { remaining: 10 });
      const log: string[] = [];
      const client = postgres(h.config.databaseUrl!, {
        max: 1,
        onnotice: () => {},
        // The connection's socket, with each write of the driver logged next to the answers.
        socket: ({ host, port }: { host: string[]; port: number[] }) => {
          const socket = net.connect(port[0]!, host[0]!);
          const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
          socket.write = ((...args: unknown[]) => {
            log.push("write");
            return write(...args);
          }) as typeof socket.write;
          return socket;
        },
      } as postgres.Options<Record<string, never>>);
      try {
        const db = drizzlePostgres({ client, schema }) as unknown as Db;
        for (const answerAfterNextStatement of [false, true]) {
          const spender = new RemainingSpender(db, 1, 0, answerAfterNextStatement);
          // Connected, and the statement of distinct keys prepared, before the log starts.
          await Promise.all([spender.spend(keyIds[60]!, 1), spender.spend(keyIds[59]!, 1)]);
          log.length = 0;
          // 29 keys in the first statement; 29 others wait for it and go into the second.
          const first = keyIds.slice(0, 29).map((keyId) => spender.spend(keyId, 1).then(() => void log.push("answer")));
          await nextTurn();
          expect(spender.statementsSent).toBe(2);
          const second = keyIds.slice(29, 58).map((keyId) => spender.spend(keyId, 1));
          await Promise.all([...first, ...second]);
          expect(spender.statementsSent).toBe(3);
          const firstAnswer = log.indexOf("answer");
          const writesBefore = log.slice(0, firstAnswer).filter((e) => e === "write").length;
          // Answered first, the first statement's verifications kept the second statement off the socket.
          expect(writesBefore).toBe(answerAfterNextStatement ? 2 : 1);
        }
      } finally {
        await client.end();
      }
    },
  );

  describe("a statement stuck on a row lock held by another transaction (PostgreSQL)", () => {
    /** A transaction of its own, on a connection of its own, holding the row lock of `keyId` until `release`. */
    const holdRowLock = async (h: { config: { databaseUrl?: string | undefined } }, keyId: string) => {
      const client = postgres(h.config.databaseUrl!, { max: 1, onnotice: () => {} });
      const conn = await client.reserve();
      await conn`begin`;
      await conn`select id from keys where id = ${keyId} for update`;
      let released: Promise<void> | undefined;
      // Idempotent: the test releases it where it wants, its `finally` again in case it failed before.
      return () =>
        (released ??= (async () => {
          await conn`commit`;
          conn.release();
          await client.end();
        })());
    };

    // PGlite is one session: a lock held there would block its only thread.
    it.skipIf(!onPostgres)(
      "starts no second statement while the first has not run for overlapAfterMs",
      async ({ h, newKeys, remainingOf }) => {
        const [stuck, other] = await newKeys(2, { remaining: 10 });
        const spender = new RemainingSpender(h.db, 2, 3_600_000);
        const release = await holdRowLock(h, stuck!);
        try {
          const first = spender.spend(stuck!, 1);
          await nextTurn();
          const second = spender.spend(other!, 1);
          // However long this takes, an hour has not passed: the other key's spend waits for the first statement.
          for (let i = 0; i < 5; i++) await nextTurn();
          await new Promise((resolve) => setTimeout(resolve, 50));
          expect(spender.statementsSent).toBe(1);
          await release();
          expect(await Promise.all([first, second])).toEqual([9, 9]);
          expect(spender.statementsSent).toBe(2);
        } finally {
          await release();
        }
        expect(await remainingOf(other!)).toBe(9);
      },
    );

    it.skipIf(!onPostgres)(
      "starts a second statement beside one that has run for overlapAfterMs, so other keys are not held",
      async ({ h, newKeys }) => {
        const [stuck, other] = await newKeys(2, { remaining: 10 });
        const spender = new RemainingSpender(h.db, 2, 30);
        const release = await holdRowLock(h, stuck!);
        let firstDone = false;
        const first = spender.spend(stuck!, 1).finally(() => {
          firstDone = true;
        });
        try {
          await nextTurn();
          // Answered while the first statement still waits for the lock (released only after this).
          expect(await spender.spend(other!, 1)).toBe(9);
          expect(firstDone).toBe(false);
          expect(spender.statementsSent).toBe(2);
        } finally {
          await release();
        }
        expect(await first).toBe(9);
      },
    );
  });
});
