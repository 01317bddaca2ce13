import type { FastifyInstance } from "fastify";
import { buildApp, buildConsoleApp } from "./app.js";
import { startBackgroundJobs, stopBackgroundJobsWithin } from "./background.js";
import { bootstrap } from "./bootstrap.js";
import type { Config } from "./config.js";
import { assertMasterKeyMatches } from "./keyring/keyring.js";
import { resolveMasterKey } from "./keyring/masterKey.js";
import { migrateAndRun, openPglite, openPostgres, redactUrl, type Store } from "./storage/client.js";
import { warnIfRedisUnreachable } from "./storage/ratelimits/ratelimiter.js";
import { createServices } from "./services.js";

export async function openStore(config: Config): Promise<Store> {
  return config.databaseUrl
    ? openPostgres(config.databaseUrl, config.databasePoolSize, {
        connectTimeoutMs: config.databaseConnectTimeoutMs,
        statementTimeoutMs: config.databaseStatementTimeoutMs,
      })
    : openPglite(config.dataDir, { sharedBuffersMb: config.pgliteSharedBuffersMb });
}

export type Server = { app: FastifyInstance; store: Store; url: string; close(): Promise<void> };

/** config → store → migrate and bootstrap → buildApp → listen. Prints how to authenticate on stdout. */
export async function startServer(
  config: Config,
  out: (line: string) => void = console.log,
  warn: (line: string) => void = (line) => console.error(`keyhaven: warning: ${line}`),
): Promise<Server> {
  // The store first: opening the embedded one locks its data directory, where the key file may be generated.
  const store = await openStore(config);
  try {
    // Then the master key: a broken key file must stop the start before anything is migrated or written.
    const master = resolveMasterKey(config);
    for (const warning of master.warnings) warn(warning);
    const boot = await migrateAndRun(store, config.databaseUrl, () => bootstrap(store.db, config));
    await assertMasterKeyMatches(store.db, master.key);
    const services = await createServices(config, store, { masterKey: master.key });
    const { ratelimiter } = services;
    const app = await buildApp({ deps: services, logger: { level: config.logLevel } });
    await warnIfRedisUnreachable(ratelimiter, config, app.log);
    const consoleApp =
      config.console.enabled && config.console.port !== undefined
        ? await buildConsoleApp({ deps: services, logger: { level: config.logLevel } })
        : undefined;
    const address = await app.listen({ port: config.port, host: config.host });
    const consoleUrl = consoleApp
      ? `${await consoleApp.listen({ port: config.console.port!, host: config.host })}/console/`
      : config.console.enabled
        ? `${config.publicUrl ?? address}/console/`
        : undefined;
    startBackgroundJobs(services, app.log);
    const url = address;
    out(startupBanner(url, store.description, master.source, boot, config, consoleUrl));
    let closing: Promise<void> | undefined;
    return {
      app,
      store,
      url,
      close: () =>
        (closing ??= (async () => {
          await Promise.all([app.close(), consoleApp?.close()]);
          // After the app (no request in flight), before the store: the jobs write what they hold, within one deadline.
          await stopBackgroundJobsWithin(services, config.shutdownTimeoutMs, app.log);
          // Not an onClose hook: Fastify refuses hooks once buildApp has made the app ready.
          await ratelimiter.close();
          await store.close();
        })()),
    };
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
}

function startupBanner(
  url: string,
  storeDescription: string,
  keySource: string,
  boot: Awaited<ReturnType<typeof bootstrap>>,
  config: Config,
  consoleUrl: string | undefined,
): string {
  const lines = [
    "",
    `keyhaven is listening on ${url}`,
    `  store:          ${storeDescription}`,
    `  encryption key: ${keySource}`,
    `  rate limits:    ${config.redisUrl ? `Redis at ${redactUrl(config.redisUrl)} (shared by replicas)` : "in process memory"}`,
    `  workspace:      ${boot.workspaceId}${boot.createdWorkspace ? " (created now)" : ""}`,
  ];
  if (boot.generatedRootKey) {
    lines.push(...generatedRootKeyNotice(boot.generatedRootKey, url));
  } else if (config.rootKey) {
    lines.push("  root key:       KEYHAVEN_ROOT_KEY (permission *) — send it as: Authorization: Bearer <root key>");
  } else {
    lines.push(
      "  root key:       use a root key of this store (printed once when the store was created, by `keyhaven migrate`",
      "                  or the first `keyhaven serve`; or one an operator created).",
      "                  None at hand? Restart with KEYHAVEN_ROOT_KEY=<a secret of 16+ characters>: it becomes one.",
    );
  }
  lines.push(
    consoleUrl
      ? `  console:        ${consoleUrl} — sign in with a root key${config.adminToken ? " or the operator token" : ""}`
      : "  console:        off (KEYHAVEN_CONSOLE=off)",
  );
  lines.push(`  operator routes: ${config.adminToken ? "enabled (KEYHAVEN_ADMIN_TOKEN)" : "disabled (set KEYHAVEN_ADMIN_TOKEN)"}`, "");
  return lines.join("\n");
}

/**
 * The lines that show a root key generated for a new store: the key itself exactly once (logs keep whatever is
 * printed, so it is not repeated in the example), and how to use it.
 */
export function generatedRootKeyNotice(key: string, url: string): string[] {
  return [
    "",
    "  A root key was generated for the default workspace. It is shown only this once; keep it safe:",
    "",
    `      ${key}`,
    "",
    "  Use it as a bearer token, for example (with the key above in $ROOT_KEY):",
    `      curl -X POST ${url}/v1/apis.createApi -H "Authorization: Bearer $ROOT_KEY" \\`,
    `           -H "Content-Type: application/json" -d '{"name":"my-api"}'`,
  ];
}
