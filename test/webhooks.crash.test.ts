import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { emptyDatabase, keyhaven, killAll, started } from "./cli-process.js";
import { freePort, waitFor } from "./wait.js";
import { WebhookReceiver } from "./webhook-receiver.js";

/**
 * kill -9 while a webhook is being sent (issue 38 §3, at least once): the receiver holds the request, the server is
 * killed with SIGKILL mid-send, and a new server on the same store sends the same message (same webhook-id, a valid
 * signature) once the dead worker's lease has ended (2 minutes of real time: the scenario is that wait).
 */
const TIMEOUT = 240_000;
const ROOT_KEY = "khroot_webhook_crash_root_key_0123456789";
const ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64");
const templateUrl = inject("templateDatabaseUrl");

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

async function resentAfterKill(env: Record<string, string>) {
  const receiver = await new WebhookReceiver().start();
  try {
    let release = () => {};
    receiver.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const common = {
      KEYHAVEN_ROOT_KEY: ROOT_KEY,
      KEYHAVEN_ENCRYPTION_KEY: ENCRYPTION_KEY,
      KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true",
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
    };
    const port = await freePort();
    const first = keyhaven(["serve"], Object.assign({}, env, common, { PORT: String(port) }));
    await started(first);
    const base = `http://127.0.0.1:${port}`;
    const hook = await post(base, "v2/keyhaven.createWebhook", { url: receiver.url, events: ["api.create"] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(200);
    expect((await post(base, "v1/apis.createApi", { name: "crash" })).status).toBe(200);
    await waitFor("the delivery in flight", () => receiver.received.length === 1);
    const messageId = receiver.received[0]!.headers["webhook-id"] as string;
    first.child.kill("SIGKILL");
    await first.exited;
    release();
    receiver.hold = undefined;
    const again = await freePort();
    const second = keyhaven(["serve"], Object.assign({}, env, common, { PORT: String(again) }));
    await started(second);
    await waitFor("the delivery sent again after the lease", () => receiver.of(messageId).length === 2, {
      timeoutMs: 180_000,
      intervalMs: 250,
    });
    const resent = receiver.of(messageId)[1]!;
    expect((new Webhook(hook.body.data.secret).verify(resent.body, resent.headers as Record<string, string>) as any).type).toBe(
      "api.create",
    );
    second.child.kill("SIGTERM");
    await second.exited;
  } finally {
    await receiver.close();
  }
}

describe.runIf(process.platform === "linux")("kill -9 while a webhook is sent", () => {
  it(
    "embedded store: the message is sent again, with the same webhook-id, once the lease ends",
    async () => {
      tmp = mkdtempSync(path.join(os.tmpdir(), "keyhaven-webhook-crash-"));
      await resentAfterKill({ KEYHAVEN_DATA_DIR: path.join(tmp, "data") });
    },
    TIMEOUT,
  );

  it.runIf(templateUrl !== undefined)(
    "PostgreSQL: the message is sent again, with the same webhook-id, once the lease ends",
    async () => {
      const database = await emptyDatabase(templateUrl!, "keyhaven_webhook_crash");
      try {
        await resentAfterKill({ DATABASE_URL: database.url });
      } finally {
        await database.drop();
      }
    },
    TIMEOUT,
  );
});
