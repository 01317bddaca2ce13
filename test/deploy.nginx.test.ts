import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { type Cli, emptyDatabase, freePort, keyhaven, killAll, spawnProcess, started, withinSeconds } from "./cli-process.js";
import { readProjectFile } from "./deploy-files.js";

/**
 * The compose file's load-balanced shape without Docker: Debian's nginx running deploy/nginx.conf (only the
 * upstream addresses, the listen address and the paths an unprivileged nginx needs are changed) in front of two
 * `keyhaven serve` processes on one PostgreSQL database. One replica is SIGKILLed under load.
 * Skipped without nginx on PATH (`apt-get install nginx`) or without TEST_DATABASE_URL: PGlite cannot be shared
 * between processes.
 */
const templateUrl = inject("templateDatabaseUrl");
const nginxBinary = (process.env.PATH ?? "")
  .split(path.delimiter)
  .map((dir) => path.join(dir, "nginx"))
  .find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });

const ROOT_KEY = `nginx-root-${Math.random().toString(36).slice(2)}-0123456789`;
const CONNECTIONS = 8;
/** Responses through nginx before the kill, and after it. */
const BEFORE_KILL = 400;
const AFTER_KILL = 800;

/** deploy/nginx.conf, runnable by this user in `dir`: upstreams, listen address and paths replaced, nothing else. */
function renderNginxConf(upstreams: string[], listenPort: number, dir: string): string {
  let conf = readProjectFile("deploy/nginx.conf");
  let replaced = 0;
  conf = conf.replace(/(upstream\s+\w+\s*\{)([^}]*)\}/, (_all, head: string, body: string) => {
    const servers = body.replace(/^([ \t]*server[ \t]+)[^\s;]+/gm, (_m, lead: string) => `${lead}${upstreams[replaced++]}`);
    return `${head}${servers}}`;
  });
  expect(replaced, "upstream servers in deploy/nginx.conf").toBe(upstreams.length);
  const listen = /listen\s+8080;/;
  expect(conf).toMatch(listen);
  conf = conf.replace(listen, `listen 127.0.0.1:${listenPort};`);
  // The packaged temp paths are under /var/lib/nginx; a log line per request says where it went and how it ended.
  const paths = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((p) => `  ${p}_temp_path ${dir}/${p};`).join("\n");
  return conf.replace(
    /http\s*\{/,
    `http {\n${paths}\n  log_format lb '$request_method\\t$uri\\t$status\\t$upstream_addr\\t$upstream_status\\t$upstream_bytes_sent';\n` +
      `  access_log ${dir}/access.log lb;\n`,
  );
}

/** One access log line; `bytesSent` per attempt: 0 when the replica was not reached (connection refused). */
type LogLine = { method: string; uri: string; status: number; upstreams: string[]; upstreamStatuses: string; bytesSent: number[] };
const LOAD_URIS = ["/v1/keys.verifyKey", "/v1/keys.getKey"];

describe.runIf(nginxBinary && templateUrl)("deploy/nginx.conf in front of two keyhaven replicas", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-nginx-"));
  let database: Awaited<ReturnType<typeof emptyDatabase>> | undefined;
  let replicas: { cli: Cli; address: string }[] = [];
  let nginx: Cli;
  let base: string;

  beforeAll(async () => {
    // nginx started as root runs its workers as nobody, which must reach the temp paths.
    chmodSync(dir, 0o755);
    database = await emptyDatabase(templateUrl!, "keyhaven_nginx");
    const env = {
      HOST: "127.0.0.1",
      DATABASE_URL: database.url,
      ...(process.env.TEST_REDIS_URL && { REDIS_URL: process.env.TEST_REDIS_URL }),
      KEYHAVEN_ROOT_KEY: ROOT_KEY,
      LOG_LEVEL: "warn",
    };
    replicas = await Promise.all(
      [0, 1].map(async () => {
        const port = await freePort();
        const cli = keyhaven(["serve"], { ...env, PORT: String(port) });
        await started(cli, 150);
        return { cli, address: `127.0.0.1:${port}` };
      }),
    );
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const confFile = path.join(dir, "nginx.conf");
    writeFileSync(confFile, renderNginxConf(replicas.map((r) => r.address), port, dir));
    nginx = spawnProcess(
      nginxBinary!,
      ["-p", dir, "-c", confFile, "-e", "stderr", "-g", `daemon off; pid ${dir}/nginx.pid; error_log stderr warn;`],
      {},
      { detached: true },
    );
    await vi.waitFor(
      async () => {
        const res = await fetch(`${base}/v1/liveness`);
        if (res.status !== 200) throw new Error(`nginx answered ${res.status}: ${nginx.stderr()}`);
      },
      { timeout: 30_000, interval: 100 },
    );
  }, 300_000);

  afterAll(async () => {
    if (nginx?.child.exitCode === null) {
      nginx.child.kill("SIGQUIT");
      await withinSeconds(nginx.exited, 10).catch(() => {});
    }
    killAll();
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`${base}${route}`, {
      method,
      headers: { authorization: `Bearer ${ROOT_KEY}`, ...(body !== undefined && { "content-type": "application/json" }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it(
    "loses no request when a replica is SIGKILLed under load, except POSTs in flight on it",
    async () => {
      const api = await call("POST", "/v1/apis.createApi", { name: "behind-nginx" });
      expect(api.status).toBe(200);
      const created = await call("POST", "/v1/keys.createKey", { apiId: api.body.apiId });
      expect(created.status).toBe(200);
      const { key, keyId } = created.body as { key: string; keyId: string };

      const [victim, survivor] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
      let responses = 0;
      let killedAt: number | undefined;
      const result = await new Promise<autocannon.Result>((resolve, reject) => {
        const instance = autocannon(
          {
            url: base,
            connections: CONNECTIONS,
            pipelining: 1,
            amount: BEFORE_KILL + AFTER_KILL,
            timeout: 20,
            requests: [
              {
                method: "POST",
                path: "/v1/keys.verifyKey",
                headers: { "content-type": "application/json" },
                body: JSON.stringify({ key }),
              },
              { method: "GET", path: `/v1/keys.getKey?keyId=${keyId}`, headers: { authorization: `Bearer ${ROOT_KEY}` } },
            ],
          },
          (err: unknown, r: autocannon.Result) => (err ? reject(err) : resolve(r)),
        );
        instance.on("response", () => {
          responses++;
          if (responses === BEFORE_KILL) {
            killedAt = responses;
            victim.cli.child.kill("SIGKILL");
          }
        });
      });
      expect(killedAt).toBe(BEFORE_KILL);
      expect(await withinSeconds(victim.cli.exited, 10)).toEqual({ code: null, signal: "SIGKILL" });

      const log: LogLine[] = readFileSync(path.join(dir, "access.log"), "utf8")
        .trim()
        .split("\n")
        .map((line) => {
          const [method, uri, status, upstreams, upstreamStatuses, bytesSent] = line.split("\t");
          return {
            method: method!,
            uri: uri!,
            status: Number(status),
            upstreams: upstreams!.split(", "),
            upstreamStatuses: upstreamStatuses!,
            bytesSent: bytesSent!.split(", ").map(Number),
          };
        });
      const load = log.filter((l) => LOAD_URIS.includes(l.uri));
      const failed = load.filter((l) => l.status !== 200);
      const retried = load.filter((l) => l.status === 200 && l.upstreams.length > 1);
      const servedBy = (r: (typeof replicas)[0]) => load.filter((l) => l.status === 200 && l.upstreams.at(-1) === r.address).length;
      console.log(
        `through nginx: ${result.requests.total} requests (${CONNECTIONS} connections, SIGKILL after ${BEFORE_KILL} answers), ` +
          `${result["2xx"]} 2xx, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts; ` +
          `served by the killed replica ${servedBy(victim)}, by the survivor ${servedBy(survivor)}; ` +
          `${retried.length} answered by the survivor after a failed attempt on the killed one; ` +
          `failed: ${JSON.stringify(failed)}`,
      );

      // The client saw exactly what nginx logged, and no connection to nginx broke.
      expect(result.errors).toBe(0);
      expect(result.timeouts).toBe(0);
      expect(load).toHaveLength(result.requests.total);
      expect(failed).toHaveLength(result.non2xx);
      // Both replicas served before the kill; the survivor carried the rest.
      expect(servedBy(victim)).toBeGreaterThan(0);
      expect(servedBy(survivor)).toBeGreaterThanOrEqual(AFTER_KILL);
      // At most one request per connection can be in flight at the kill. Only a POST that had reached the killed
      // replica (bytes sent: it was in flight there, unanswered) may fail: nginx does not resend it, since it may
      // have been spent. GETs, and POSTs that found the replica gone (nothing sent), went on to the survivor.
      expect(failed.length).toBeLessThanOrEqual(CONNECTIONS);
      for (const line of failed) {
        expect(line).toMatchObject({ method: "POST", status: 502, upstreams: [victim.address] });
        expect(line.bytesSent[0], JSON.stringify(line)).toBeGreaterThan(0);
      }
    },
    240_000,
  );
});
