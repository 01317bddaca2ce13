import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Cli, emptyDatabase, keyhaven, started } from "./cli-process.js";
import { freePort } from "./wait.js";

/**
 * Two real `keyhaven serve` processes on one PostgreSQL and one Redis, started at the same moment: what the
 * compose file runs behind its load balancer. Needs TEST_DATABASE_URL and TEST_REDIS_URL (CI's second run);
 * the embedded store cannot be shared between processes.
 */
const templateUrl = inject("templateDatabaseUrl");
const redisUrl = process.env.TEST_REDIS_URL;
const rootKey = `replica-root-${randomBytes(12).toString("hex")}`;

describe.runIf(templateUrl && redisUrl)("two keyhaven processes sharing PostgreSQL and Redis", () => {
  const children: Cli[] = [];
  const urls: string[] = [];
  let dropDatabase = async () => {};

  beforeAll(async () => {
    // An empty database: both processes migrate and bootstrap it at once, under the advisory lock.
    const database = await emptyDatabase(templateUrl!, "keyhaven_replicas");
    dropDatabase = database.drop;
    const encryptionKey = randomBytes(32).toString("base64");
    const starting = [0, 1].map(async () => {
      const port = await freePort();
      const cli = keyhaven(["serve"], {
        PORT: String(port),
        HOST: "127.0.0.1",
        DATABASE_URL: database.url,
        REDIS_URL: redisUrl!,
        KEYHAVEN_ROOT_KEY: rootKey,
        KEYHAVEN_ENCRYPTION_KEY: encryptionKey,
        LOG_LEVEL: "warn",
      });
      children.push(cli);
      await started(cli, 100);
      return `http://127.0.0.1:${port}`;
    });
    urls.push(...(await Promise.all(starting)));
  }, 120_000);

  afterAll(async () => {
    for (const { child } of children) child.kill("SIGTERM");
    await Promise.all(children.map((c) => c.exited));
    await dropDatabase();
  });

  const call = async (i: number, path: string, body: unknown, auth = true) => {
    const res = await fetch(`${urls[i % 2]}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(auth && { authorization: `Bearer ${rootKey}` }) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  async function newKey(fields: Record<string, unknown>) {
    const api = await call(0, "/v1/apis.createApi", { name: "replicas" });
    expect(api.status).toBe(200);
    const created = await call(1, "/v1/keys.createKey", { apiId: api.body.apiId, ...fields });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body as { key: string; keyId: string };
  }

  it("started both on one freshly migrated database with one default workspace", async () => {
    for (let i = 0; i < 2; i++) expect((await call(i, "/v1/apis.createApi", { name: "either" })).status).toBe(200);
  });

  it("spends exactly 50 uses of 200 concurrent verifications split across both", async () => {
    const { key, keyId } = await newKey({ remaining: 50 });
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => call(i, "/v1/keys.verifyKey", { key }, false)));
    expect(results.filter((r) => r.body.valid)).toHaveLength(50);
    const got = await fetch(`${urls[0]}/v1/keys.getKey?keyId=${keyId}`, { headers: { authorization: `Bearer ${rootKey}` } });
    expect(((await got.json()) as any).remaining).toBe(0);
  });

  it("shares one rate-limit budget: exactly 10 of 100 concurrent verifications pass a limit of 10", async () => {
    const hour = 3_600_000;
    if (hour - (Date.now() % hour) < 10_000) await new Promise((r) => setTimeout(r, hour - (Date.now() % hour) + 100));
    const { key } = await newKey({ ratelimit: { limit: 10, duration: hour } });
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => call(i, "/v1/keys.verifyKey", { key }, false)));
    expect(results.filter((r) => r.body.valid)).toHaveLength(10);
    expect(results.filter((r) => r.body.code === "RATE_LIMITED")).toHaveLength(90);
  });

  it("sees an update or deletion made on one process on the very next verification on the other", async () => {
    const { key, keyId } = await newKey({});
    expect((await call(1, "/v1/keys.verifyKey", { key }, false)).body.valid).toBe(true);
    expect((await call(0, "/v1/keys.updateKey", { keyId, enabled: false })).status).toBe(200);
    expect((await call(1, "/v1/keys.verifyKey", { key }, false)).body.code).toBe("DISABLED");
    expect((await call(1, "/v1/keys.updateKey", { keyId, enabled: true })).status).toBe(200);
    expect((await call(0, "/v1/keys.verifyKey", { key }, false)).body.valid).toBe(true);
    expect((await call(1, "/v1/keys.deleteKey", { keyId })).status).toBe(200);
    expect((await call(0, "/v1/keys.verifyKey", { key }, false)).body.code).toBe("NOT_FOUND");
  });
});
