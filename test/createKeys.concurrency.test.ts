import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

/**
 * Two imports that share one hash, sent at the same moment over real sockets to two app instances (replicas);
 * on PostgreSQL each has its own connection pool on the one database.
 */
let h: Harness;
let t: Tenant;
let apiId: string;
const urls: string[] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  h = await createHarness();
  t = await h.tenant();
  apiId = (await h.post("/v1/apis.createApi", { name: "race" }, t.rootKey)).body.apiId;
  const both = await h.listenWithReplica();
  urls.push(...both.urls);
  closers.push(both.closeReplica);
});
afterAll(async () => {
  for (const close of closers) await close();
  await h.close();
});

const hashOf = () => hashKey(randomBytes(16).toString("hex"));
const batchOf = (n: number) => Array.from({ length: n }, () => ({ apiId, hash: { value: hashOf(), variant: "sha256_base64" } }));

async function post(url: string, body: unknown) {
  const res = await fetch(`${url}/v1/migrations.createKeys`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe("two concurrent imports sharing one hash", () => {
  it("lets exactly one succeed and the other write nothing, every time", async () => {
    for (let round = 0; round < 15; round++) {
      const shared = { apiId, hash: { value: hashOf(), variant: "sha256_base64" } };
      const a = batchOf(100);
      const b = batchOf(100);
      // Vary where the shared key sits, so the two transactions meet at different points.
      a[(round * 7) % 100] = shared;
      b[99 - ((round * 13) % 100)] = shared;
      const [ra, rb] = await Promise.all([post(urls[0]!, a), post(urls[1]!, b)]);
      const statuses = [ra.status, rb.status].sort();
      expect(statuses, JSON.stringify([ra.body, rb.body])).toEqual([200, 409]);

      const [winner, loser, loserBatch, winnerBatch] = ra.status === 200 ? [ra, rb, b, a] : [rb, ra, a, b];
      expect(loser.body.error.code).toBe("CONFLICT");
      expect(winner.body.keyIds).toHaveLength(100);
      const inList = (batch: typeof a) => batch.map((k) => `'${k.hash.value}'`).join(",");
      const loserRows = await h.sql<{ n: string }>(
        `select count(*) as n from keys where hash in (${inList(loserBatch.filter((k) => k !== shared))})`,
      );
      expect(Number(loserRows[0]!.n)).toBe(0);
      const winnerRows = await h.sql<{ n: string }>(`select count(*) as n from keys where hash in (${inList(winnerBatch)})`);
      expect(Number(winnerRows[0]!.n)).toBe(100);
    }
  });

  it("imports disjoint batches concurrently without losing any", async () => {
    const batches = Array.from({ length: 8 }, () => batchOf(100));
    const results = await Promise.all(batches.map((b, i) => post(urls[i % 2]!, b)));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    const all = batches
      .flat()
      .map((k) => `'${k.hash.value}'`)
      .join(",");
    const rows = await h.sql<{ n: string }>(`select count(*) as n from keys where hash in (${all})`);
    expect(Number(rows[0]!.n)).toBe(800);
  });

  it("creates one identity when concurrent imports introduce the same new externalId", async () => {
    const externalId = `race-${randomBytes(4).toString("hex")}`;
    const batches = Array.from({ length: 6 }, () => batchOf(20).map((k) => ({ ...k, externalId })));
    const results = await Promise.all(batches.map((b, i) => post(urls[i % 2]!, b)));
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
    const identities = await h.sql(`select id from identities where external_id = '${externalId}'`);
    expect(identities).toHaveLength(1);
  });
});
