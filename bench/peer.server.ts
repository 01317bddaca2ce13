/**
 * The peer server for bench/peer.bench.ts: better-auth's API-key plugin (bench/peer.auth.ts) behind a minimal
 * Fastify 5 server, as keyhaven is. On start it creates better-auth's tables with better-auth's own migration
 * (getMigrations → runMigrations) on DATABASE_URL, which the benchmark points at a fresh database.
 *
 * Routes:
 *   POST /verify        {"key": "<plaintext>"} → auth.api.verifyApiKey({ body: { key } }), its answer as JSON
 *                       ({ valid, error, key }); 200 whether the key is valid or not, as better-auth answers.
 *   POST /setup/keys    {"count": n} → creates one user and n API keys for it with auth.api.createApiKey (no
 *                       `remaining`, no rate limit); answers {"keys": [plaintext…]}. Used once, before the load.
 *   GET  /ready         200 once the migration has run.
 *
 * Run:   DATABASE_URL=postgres://… PORT=8082 node --import tsx bench/peer.server.ts  (HOST defaults to 127.0.0.1)
 * Environment: DATABASE_POOL_SIZE, the pool's size (default 4, keyhaven's default, so both have as many
 * connections to PostgreSQL).
 */
import { randomBytes } from "node:crypto";
import { getMigrations } from "better-auth/db/migration";
import Fastify from "fastify";
import pg from "pg";
import { createPeerAuth, peerAuthOptions } from "./peer.auth.js";

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error("DATABASE_URL is required");
const port = Number(process.env.PORT ?? 8082);
const host = process.env.HOST ?? "127.0.0.1";
const poolSize = Number(process.env.DATABASE_POOL_SIZE?.trim() || 4);
if (!Number.isInteger(poolSize) || poolSize < 1)
  throw new Error(`DATABASE_POOL_SIZE must be a positive integer, got "${process.env.DATABASE_POOL_SIZE}"`);

const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
// The tables first: an instance made before them logs a schema mismatch.
const { runMigrations } = await getMigrations(peerAuthOptions(pool));
await runMigrations();
const auth = createPeerAuth(pool);

const app = Fastify({ logger: false });

app.get("/ready", async () => ({ ready: true }));

app.post<{ Body: { key?: unknown } }>("/verify", async (req, reply) => {
  const key = req.body?.key;
  if (typeof key !== "string") return reply.code(400).send({ error: "key must be a string" });
  return auth.api.verifyApiKey({ body: { key } });
});

app.post<{ Body: { count?: unknown } }>("/setup/keys", async (req, reply) => {
  const count = req.body?.count;
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > 10_000) {
    return reply.code(400).send({ error: "count must be an integer from 1 to 10000" });
  }
  const context = await auth.$context;
  const user = await context.internalAdapter.createUser(
    { email: `bench-${randomBytes(6).toString("hex")}@example.com`, name: "bench" },
    { method: "admin" },
  );
  const keys: string[] = [];
  for (let i = 0; i < count; i++) {
    const created = await auth.api.createApiKey({ body: { userId: user.id, name: `bench ${i}` } });
    keys.push(created.key);
  }
  return { keys };
});

await app.listen({ port, host });

let closing = false;
const shutdown = () => {
  if (closing) process.exit(1);
  closing = true;
  app
    .close()
    .then(() => pool.end())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
