import { randomBytes } from "node:crypto";
import { buildApp } from "../src/app.js";
import { bootstrap } from "../src/bootstrap.js";
import { loadConfig } from "../src/config.js";
import { createServices } from "../src/services.js";
import { migrateAndRun, openPglite, openPostgres } from "../src/storage/client.js";

/**
 * keyhaven in this process, for the benches that drive it through app.inject: the embedded store in memory, or
 * PostgreSQL at `url` (a database the run may migrate and write to) with `poolSize` connections; a root key of its
 * own; `env` added to the configuration. `post` answers a route's JSON, or throws unless it answered 200.
 */
export async function inProcessKeyhaven(url: string | undefined, poolSize: number, env: Record<string, string> = {}) {
  const rootKey = `khroot_${randomBytes(16).toString("hex")}`;
  const config = loadConfig({
    KEYHAVEN_DATA_DIR: "memory://",
    KEYHAVEN_ROOT_KEY: rootKey,
    KEYHAVEN_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    LOG_LEVEL: "silent",
    ...env,
    ...(url && { DATABASE_URL: url }),
  });
  const store = url ? openPostgres(url, poolSize) : await openPglite("memory://");
  await migrateAndRun(store, url, () => bootstrap(store.db, config));
  const services = await createServices(config, store);
  const app = await buildApp({ deps: services, logger: false });
  const post = async (path: string, body: unknown) => {
    const res = await app.inject({
      method: "POST",
      url: path,
      headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
      payload: JSON.stringify(body),
    });
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${res.body}`);
    return res.json() as { data: Record<string, unknown> };
  };
  return { store, services, app, post };
}
