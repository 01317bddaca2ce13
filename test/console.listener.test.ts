import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { startServer } from "../src/main.js";

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const start = async (env: Record<string, string>) => {
  const lines: string[] = [];
  const server = await startServer(
    loadConfig({ KEYHAVEN_DATA_DIR: "memory://", PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", ...env }),
    (line) => lines.push(line),
    () => {},
  );
  return { server, banner: lines.join("\n") };
};

describe("where the console is served", () => {
  it("is under /console on the API's listener by default, and the start banner says where", async () => {
    const { server, banner } = await start({});
    try {
      expect(banner).toContain(`  console:        ${server.url}/console/ — sign in with a root key`);
      const page = await fetch(`${server.url}/console/sign-in`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("Root key or operator token");
      // Signing in over a real socket: the browser's Origin is the listener's own.
      const key = /khroot_[A-Za-z0-9]+/.exec(banner)![0];
      const res = await fetch(`${server.url}/console/sign-in`, {
        method: "POST",
        redirect: "manual",
        headers: { origin: server.url, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ secret: key }),
      });
      expect(res.status).toBe(303);
      const cookie = res.headers.get("set-cookie")!.split(";")[0]!;
      expect((await fetch(`${server.url}/console/`, { headers: { cookie } })).status).toBe(200);
    } finally {
      await server.close();
    }
  }, 120_000);

  it("is on a listener of its own with KEYHAVEN_CONSOLE_PORT, and not on the API's", async () => {
    const port = await freePort();
    const { server, banner } = await start({ KEYHAVEN_CONSOLE_PORT: String(port), KEYHAVEN_ADMIN_TOKEN: "operator-token-0123456789" });
    try {
      expect(banner).toContain(`  console:        http://127.0.0.1:${port}/console/ — sign in with a root key or the operator token`);
      expect((await fetch(`http://127.0.0.1:${port}/console/sign-in`)).status).toBe(200);
      const root = await fetch(`http://127.0.0.1:${port}/`, { redirect: "manual" });
      expect(root.status).toBe(302);
      expect(root.headers.get("location")).toBe("/console/");
      const onApi = await fetch(`${server.url}/console/sign-in`);
      expect(onApi.status).toBe(404);
      expect(onApi.headers.get("content-type")).toMatch(/^application\/json/);
    } finally {
      await server.close();
    }
  }, 120_000);

  it("is off with KEYHAVEN_CONSOLE=off, and the banner says so", async () => {
    const { server, banner } = await start({ KEYHAVEN_CONSOLE: "off" });
    try {
      expect(banner).toContain("  console:        off (KEYHAVEN_CONSOLE=off)");
      expect((await fetch(`${server.url}/console/sign-in`)).status).toBe(404);
    } finally {
      await server.close();
    }
  }, 120_000);
});
