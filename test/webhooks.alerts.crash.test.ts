import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { emptyDatabase, keyhaven, killAll, started } from "./cli-process.js";
import { freePort, waitFor } from "./wait.js";
import { WebhookReceiver } from "./webhook-receiver.js";

/**
 * kill -9 during spends (issue 38 §3): keys with credits are spent by concurrent verifications, the server is killed
 * with SIGKILL mid-way, and a new server on the same store sends what the outbox holds. No key is spent after the
 * kill, so a crossing whose event was lost could not be made again: every key acknowledged below its threshold (or at
 * 0) before the kill must deliver exactly one key.credits.low (key.credits.exhausted), and no key whose stored credits
 * did not cross may deliver one (none invented).
 */
const TIMEOUT = 180_000;
const ROOT_KEY = "khroot_alerts_crash_root_key_0123456789";
const ENCRYPTION_KEY = Buffer.alloc(32, 9).toString("base64");
const templateUrl = inject("templateDatabaseUrl");
const KEYS = 40;
const CREDITS = 12;
const BELOW = 10;

let tmp = "";
afterAll(() => {
  killAll();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function post(base: string, route: string, body: unknown) {
  const res = await fetch(`${base}/${route}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

async function noEventLostThroughKill(env: Record<string, string>) {
  const receiver = await new WebhookReceiver().start();
  try {
    const common = {
      KEYHAVEN_ROOT_KEY: ROOT_KEY,
      KEYHAVEN_ENCRYPTION_KEY: ENCRYPTION_KEY,
      KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true",
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
    };
    const port = await freePort();
    const first = keyhaven(["serve"], Object.assign({}, env, common, { PORT: String(port) }));
    await started(first, 120);
    const base = `http://127.0.0.1:${port}`;
    const api = await post(base, "v2/apis.createApi", { name: "alerts-crash" });
    expect(api.status, JSON.stringify(api.body)).toBe(200);
    const apiId = api.body.data.apiId as string;
    const hook = await post(base, "v2/keyhaven.createWebhook", { url: receiver.url, events: ["key.credits.low", "key.credits.exhausted"] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(200);
    expect((await post(base, "v2/keyhaven.setAlertThresholds", { apiId, creditsLow: { remaining: BELOW } })).status).toBe(200);
    const keys: { keyId: string; key: string }[] = [];
    for (let i = 0; i < KEYS; i++) {
      const created = await post(base, "v2/keys.createKey", { apiId, credits: { remaining: CREDITS } });
      expect(created.status).toBe(200);
      keys.push(created.body.data);
    }

    // Spend from 8 loops at once; kill -9 once about half the credits are spent, verifications still in flight.
    const lowestAcked = new Map<string, number>();
    let acked = 0;
    let killed = false;
    const loop = async (n: number) => {
      for (let i = n; !killed; i += 8) {
        const k = keys[(i * 7) % KEYS]!;
        try {
          const res = await post(base, "v2/keys.verifyKey", { key: k.key });
          if (res.status === 200 && res.body.data.valid === true) {
            const left = res.body.data.credits as number;
            lowestAcked.set(k.keyId, Math.min(lowestAcked.get(k.keyId) ?? CREDITS, left));
            acked++;
          }
        } catch {
          return; // the server is gone
        }
      }
    };
    const loops = Array.from({ length: 8 }, (_, n) => loop(n));
    await waitFor("half the credits spent", () => acked >= (KEYS * CREDITS) / 2, { timeoutMs: 60_000, intervalMs: 5 });
    killed = true;
    first.child.kill("SIGKILL");
    await first.exited;
    await Promise.all(loops);

    const again = await freePort();
    const second = keyhaven(["serve"], Object.assign({}, env, common, { PORT: String(again) }));
    await started(second, 120); // PGlite replays its log first: slow on a busy machine
    const base2 = `http://127.0.0.1:${again}`;
    // What the store kept of each key (at most what was acknowledged: a spend answered was committed).
    const stored = new Map<string, number>();
    for (const k of keys) {
      const got = await post(base2, "v2/keys.getKey", { keyId: k.keyId });
      expect(got.status).toBe(200);
      const left = got.body.data.credits.remaining as number;
      expect(left).toBeLessThanOrEqual(lowestAcked.get(k.keyId) ?? CREDITS);
      stored.set(k.keyId, left);
    }
    const expected = (kind: "low" | "exhausted") =>
      keys.filter((k) => (kind === "low" ? stored.get(k.keyId)! < BELOW : stored.get(k.keyId) === 0)).length;
    const distinct = () => {
      const seen = new Map<string, Set<string>>(); // "<keyId> <type>" -> webhook-ids
      for (const r of receiver.received) {
        const event = JSON.parse(r.body);
        const id = `${event.data.keyId} ${event.type}`;
        if (!seen.has(id)) seen.set(id, new Set());
        seen.get(id)!.add(r.headers["webhook-id"] as string);
      }
      return seen;
    };
    await waitFor(
      "every crossing's event delivered",
      () => {
        const seen = distinct();
        const of = (type: string) => [...seen.keys()].filter((s) => s.endsWith(` ${type}`)).length;
        return of("key.credits.low") >= expected("low") && of("key.credits.exhausted") >= expected("exhausted");
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const seen = distinct();
    expect(expected("low")).toBeGreaterThan(0);
    for (const k of keys) {
      const left = stored.get(k.keyId)!;
      // Exactly one message per crossing that the store kept (a resent one has the same webhook-id), none otherwise.
      expect(seen.get(`${k.keyId} key.credits.low`)?.size ?? 0, `${k.keyId} low at ${left}`).toBe(left < BELOW ? 1 : 0);
      expect(seen.get(`${k.keyId} key.credits.exhausted`)?.size ?? 0, `${k.keyId} exhausted at ${left}`).toBe(left === 0 ? 1 : 0);
      // Every crossing a client was told of (an acknowledged spend below the threshold) is among them.
      if ((lowestAcked.get(k.keyId) ?? CREDITS) < BELOW) expect(left).toBeLessThan(BELOW);
    }
    second.child.kill("SIGTERM");
    await second.exited;
  } finally {
    await receiver.close();
  }
}

describe.runIf(process.platform === "linux")("kill -9 during spends", () => {
  it(
    "embedded store: every acknowledged crossing delivers exactly one event, none is invented",
    async () => {
      tmp = mkdtempSync(path.join(os.tmpdir(), "keyhaven-alerts-crash-"));
      await noEventLostThroughKill({ KEYHAVEN_DATA_DIR: path.join(tmp, "data") });
    },
    TIMEOUT,
  );

  it.runIf(templateUrl !== undefined)(
    "PostgreSQL: every acknowledged crossing delivers exactly one event, none is invented",
    async () => {
      const database = await emptyDatabase(templateUrl!, "keyhaven_alerts_crash");
      try {
        await noEventLostThroughKill({ DATABASE_URL: database.url });
      } finally {
        await database.drop();
      }
    },
    TIMEOUT,
  );
});
