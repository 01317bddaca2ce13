import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.js";
import { AUDIT_SETTLE_MS } from "../src/core/audit/audit.read.js";
import { trustedCaller } from "../src/core/caller.js";
import { auditEntries } from "./audit-entries.js";
import { once } from "node:events";
import { killAll, runKeyhaven, spawnProcess } from "./cli-process.js";
import { ADMIN_TOKEN, createHarness, type Harness, type Tenant } from "./helper.js";

// `keyhaven audit export` as a user runs it (the compiled CLI, a child process) against the real app listening on a
// loopback port, on this run's store. The app's clock is set by hand, so that entries have distinct times and are
// past the settling margin that oldest-first reads keep (AUDIT_SETTLE_MS) without waiting for it.

const TIMEOUT = 60_000;

describe("keyhaven audit export", () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  let h: Harness;
  let url: string;
  let a: Tenant;
  let b: Tenant;
  /** Times (unix ms) before and after a's first three entries. */
  let t0: number;
  let t3: number;

  /** One real change through the API, a millisecond after the one before. */
  async function change(tenant: Tenant, path: string, body: unknown) {
    clock.advance(1);
    const res = await h.post(path, body, tenant.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  }

  const exportAudit = (args: string[], env: Record<string, string> = { KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN }) =>
    runKeyhaven(["audit", "export", "--url", url, ...args], env);

  const lines = (out: string) =>
    out
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l));

  beforeAll(async () => {
    h = await createHarness({}, { clock });
    url = await h.app.listen({ port: 0, host: "127.0.0.1" });
    a = await h.tenant();
    b = await h.tenant();
    t0 = clock.now();
    const { apiId } = await change(a, "/v1/apis.createApi", { name: "payments" });
    await change(a, "/v1/keys.createKey", { apiId, meta: { plan: "secret-plan-value" } });
    await change(a, "/v1/keys.createKey", { apiId, name: "second" });
    t3 = clock.now() + 1;
    // More than one page of listAuditLogs (100 entries).
    for (let i = 0; i < 105; i++) await change(a, "/v1/keys.createKey", { apiId });
    const other = await change(b, "/v1/apis.createApi", { name: "other" });
    await change(b, "/v1/keys.createKey", { apiId: other.apiId });
    clock.advance(AUDIT_SETTLE_MS + 1);
  }, TIMEOUT);
  afterAll(async () => {
    killAll();
    await h?.close();
  });

  it(
    "streams every entry oldest first as NDJSON, as listAuditLogs answers them, over more than one page",
    async () => {
      const { code, out, err } = await exportAudit(["--since", String(t0)]);
      expect(code, err).toBe(0);
      const stored = await auditEntries(h);
      const exported = lines(out);
      expect(exported.map((e) => e.id)).toEqual(stored.map((e) => e.id));
      expect(exported.length).toBeGreaterThan(100);
      expect(exported.slice(0, 3).map((e) => e.event)).toEqual(["api.create", "key.create", "key.create"]);
      // Each line is the entry as the route answers it.
      const page = await h.post("/v2/keyhaven.listAuditLogs", { order: "asc", limit: 3, since: t0 }, ADMIN_TOKEN);
      expect(exported.slice(0, 3)).toEqual(page.body.data);
      expect(out).not.toContain("secret-plan-value");
      // Progress went to stderr (stdout is a pipe here), never to stdout.
      expect(err).toBe(`${exported.length} entries exported\n`);
    },
    TIMEOUT,
  );

  it(
    "holds --since, --until and --workspace, in ISO 8601 or unix milliseconds",
    async () => {
      const first3 = (await auditEntries(h, { workspaceId: a.workspaceId })).slice(0, 3).map((e) => e.id);
      const ranged = await exportAudit(["--since", new Date(t0).toISOString(), "--until", String(t3), "--quiet"]);
      expect(ranged.code, ranged.err).toBe(0);
      expect(lines(ranged.out).map((e) => e.id)).toEqual(first3);
      expect(ranged.err).toBe("");

      const onlyB = await exportAudit(["--since", "2026-06-01", "--workspace", b.workspaceId, "--quiet"]);
      expect(onlyB.code, onlyB.err).toBe(0);
      const entries = lines(onlyB.out);
      expect(entries.map((e) => e.event)).toEqual(["api.create", "key.create"]);
      expect(new Set(entries.map((e) => e.workspaceId))).toEqual(new Set([b.workspaceId]));

      const offset = await exportAudit(["--since", "2026-06-01T14:00+02:00", "--until", "2026-06-01T12:00:00Z", "--quiet"]);
      expect(offset.code).toBe(2);
      expect(offset.err).toContain("--until must be after --since");
      const empty = await exportAudit(["--since", "2027-01-01", "--quiet"]);
      expect([empty.code, empty.out]).toEqual([0, ""]);
    },
    TIMEOUT,
  );

  it(
    "with a root key (KEYHAVEN_ROOT_KEY) exports its own workspace's entries alone",
    async () => {
      const { code, out, err } = await exportAudit(["--since", String(t0), "--quiet"], { KEYHAVEN_ROOT_KEY: b.rootKey });
      expect(code, err).toBe(0);
      expect(lines(out).map((e) => e.id)).toEqual((await auditEntries(h, { workspaceId: b.workspaceId })).map((e) => e.id));
      const other = await exportAudit(["--since", String(t0), "--workspace", a.workspaceId], { KEYHAVEN_ROOT_KEY: b.rootKey });
      expect(other.code).toBe(1);
      expect(other.err).toMatch(/^keyhaven audit: 403 unkey\/authorization\/insufficient_permissions: /);
      expect(other.out).toBe("");
    },
    TIMEOUT,
  );

  it(
    "ends quietly, exit 0, when its reader stops reading (| head)",
    async () => {
      const script = 'node bin/keyhaven.mjs "$@" | head -n 1; echo "rc=$PIPESTATUS" >&2';
      const args = ["audit", "export", "--url", url, "--since", String(t0), "--quiet"];
      const cli = spawnProcess("bash", ["-c", script, "bash", ...args], { KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
      await once(cli.child, "close");
      expect(lines(cli.stdout())).toHaveLength(1);
      expect(cli.stderr()).toBe("rc=0\n");
    },
    TIMEOUT,
  );

  it(
    "`keyhaven help` and `keyhaven audit --help` describe it; `keyhaven audit` alone is a usage error",
    async () => {
      const help = await runKeyhaven(["help"]);
      expect(help.out).toContain("keyhaven audit export --since <time> [--until <time>] [--workspace <id>]");
      const auditHelp = await runKeyhaven(["audit", "--help"]);
      expect(auditHelp.code).toBe(0);
      expect(auditHelp.out).toMatch(/^Usage: keyhaven audit export --since <time>/);
      for (const option of ["--until", "--workspace", "--admin-token", "--root-key", "--url", "--timeout", "--attempts", "--quiet"]) {
        expect(auditHelp.out).toContain(option);
      }
      const bare = await runKeyhaven(["audit"]);
      expect([bare.code, bare.out]).toEqual([2, ""]);
      expect(bare.err).toContain("a command is required: export");
    },
    TIMEOUT,
  );

  it(
    "shows no progress when stdout is a terminal",
    async () => {
      // script(1) gives the command a terminal for stdout and stderr alike: entries only, no progress line.
      const command = `node bin/keyhaven.mjs audit export --url ${url} --since ${t0} --until ${t3}`;
      const cli = spawnProcess("script", ["-q", "-e", "-c", command, "/dev/null"], { KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
      const [code] = await once(cli.child, "close");
      expect(code, cli.stderr()).toBe(0);
      const printed = cli.stdout().replaceAll("\r", "");
      expect(lines(printed)).toHaveLength(3);
      expect(printed).not.toContain("entries");
    },
    TIMEOUT,
  );

  it.each([
    [["--since", "yesterday"], '--since: not a time, got "yesterday"'],
    [["--since", "2026-02-30"], '--since: no such date, got "2026-02-30"'],
    [["--since", "2026-06-01T12:00"], "--since: a date-time needs Z or an offset (+01:00)"],
    [["--since", "1", "--until", "12:00"], '--until: not a time, got "12:00"'],
    [[], "--since <time> is required"],
    [["--since", "1", "--timeout", "0"], "--timeout must be an integer from 1 to 3600"],
  ])(
    "%j is a usage error (exit 2) that says what is wrong and sends nothing",
    async (args, message) => {
      const before = await auditEntries(h);
      const { code, out, err } = await exportAudit(args);
      expect(code).toBe(2);
      expect(err).toContain(message);
      expect(out).toBe("");
      expect(await auditEntries(h)).toEqual(before);
    },
    TIMEOUT,
  );

  it(
    "a wrong token exits 1 with the server's message, and never prints the token",
    async () => {
      const token = "khroot_wrong-0123456789abcdef";
      for (const env of [{ KEYHAVEN_ADMIN_TOKEN: token }, { KEYHAVEN_ROOT_KEY: token }] as Record<string, string>[]) {
        const { code, out, err } = await exportAudit(["--since", "1"], env);
        expect(code).toBe(1);
        expect(err).toMatch(/^keyhaven audit: 401 unkey\/authentication\/key_not_found: .+\n$/);
        expect(out).toBe("");
        expect(`${out}${err}`).not.toContain(token);
      }
      const passed = await runKeyhaven(["audit", "export", "--url", url, "--since", "1", "--admin-token", token]);
      expect(passed.code).toBe(1);
      expect(`${passed.out}${passed.err}`).not.toContain(token);
      const none = await runKeyhaven(["audit", "export", "--url", url, "--since", "1"]);
      expect(none.code).toBe(2);
      expect(none.err).toContain("a token is required");
    },
    TIMEOUT,
  );

  it(
    "retries a 503 and a dropped connection a bounded number of times",
    async () => {
      // A stand-in server: 503 twice, then one page; then, for a second run, only 503s.
      let calls = 0;
      let answerAfter = 2;
      let notALog = false;
      const entry = {
        id: "audit_x",
        time: 1,
        event: "api.create",
        workspaceId: "ws_x",
        actor: { type: "operator", id: "operator", name: "operator" },
        targets: [],
        description: "d",
        context: { surface: "v2" },
      };
      const server: Server = createServer((req, res) => {
        req.resume();
        calls += 1;
        if (calls <= answerAfter) {
          res.writeHead(503, { "content-type": "application/json", "retry-after": "0" });
          res.end(
            JSON.stringify({
              meta: { requestId: "r" },
              error: {
                title: "Service Unavailable",
                detail: "the store is unavailable",
                status: 503,
                type: "https://unkey.com/docs/errors/unkey/application/service_unavailable",
              },
            }),
          );
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        if (notALog) res.end(JSON.stringify({ status: "ok" }));
        else res.end(JSON.stringify({ meta: { requestId: "r" }, data: [entry], pagination: { hasMore: false } }));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const stub = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        const ok = await runKeyhaven(["audit", "export", "--url", stub, "--since", "1"], { KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
        expect(ok.code, ok.err).toBe(0);
        expect(lines(ok.out)).toEqual([entry]);
        expect(calls).toBe(3);
        expect(ok.err).toContain("503 unkey/application/service_unavailable: the store is unavailable; retrying (attempt 2 of 5)");

        calls = 0;
        answerAfter = Number.POSITIVE_INFINITY;
        const down = await runKeyhaven(["audit", "export", "--url", stub, "--since", "1", "--attempts", "3"], {
          KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN,
        });
        expect(down.code).toBe(1);
        expect(calls).toBe(3);
        expect(down.err).toMatch(/keyhaven audit: 503 unkey\/application\/service_unavailable: the store is unavailable\n$/);
        // Something else at --url: a 200 that is not a page of the log is an error, not an empty export.
        calls = 0;
        answerAfter = -1;
        notALog = true;
        const other = await runKeyhaven(["audit", "export", "--url", stub, "--since", "1"], { KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
        expect(other.code).toBe(1);
        expect(other.err).toContain("did not answer as keyhaven.listAuditLogs does");
        expect(other.out).toBe("");
      } finally {
        server.close();
      }
      // Nothing listens on the stand-in's port any more: connection refused, tried twice, then exit 1.
      const refused = await runKeyhaven(["audit", "export", "--url", stub, "--since", "1", "--attempts", "2"], {
        KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN,
      });
      expect(refused.code).toBe(1);
      expect(refused.err).toContain("retrying (attempt 2 of 2)");
      expect(refused.err).toMatch(new RegExp(`keyhaven audit: ${stub.replaceAll(".", "\\.")} did not answer: ECONNREFUSED`));
      expect(refused.err).not.toContain(ADMIN_TOKEN);
    },
    TIMEOUT,
  );

  it(
    "prints the entries so far on stderr as it goes (a line per 1,000), and nothing of the kind with --quiet",
    async () => {
      // 1,001 entries of a workspace of their own, written through the write gate (faster than 1,001 requests).
      const c = await h.tenant();
      const caller = trustedCaller({ kind: "cli", id: "cli_test", name: "test" }, c.workspaceId, { surface: "cli" });
      for (let i = 0; i < 1001; i++) {
        if (i % 100 === 0) clock.advance(1);
        await h.services.changes.change(caller, async (_tx, record) => {
          record({ event: "key.create", targets: [{ type: "key", id: `key_${i}` }], description: `entry ${i}` });
        });
      }
      clock.advance(AUDIT_SETTLE_MS + 1);
      const run = await exportAudit(["--since", String(t0), "--workspace", c.workspaceId]);
      expect(run.code, run.err).toBe(0);
      expect(lines(run.out)).toHaveLength(1001);
      expect(run.err).toBe("1,000 entries\n1,001 entries exported\n");
      const quiet = await exportAudit(["--since", String(t0), "--workspace", c.workspaceId, "--quiet"]);
      expect([quiet.code, quiet.err, lines(quiet.out).length]).toEqual([0, "", 1001]);
    },
    TIMEOUT,
  );
});
