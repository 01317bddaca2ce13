/**
 * The peer of bench/peer.bench.ts: better-auth with its API-key plugin (@better-auth/api-key), on a PostgreSQL
 * database through node-postgres (the `pg` pool better-auth's Kysely adapter takes). Configured as the benchmark
 * compares it with keyhaven's plain keys: the plugin's rate limit off (its default is on, 10 requests a day), keys
 * hashed (the default), no `remaining`, no metadata, no sessions from API keys; better-auth's own HTTP rate limit
 * and telemetry off. Everything else is the plugin's default (storage "database"). In 1.7.5 a verification reads
 * the key's row by its hash and then updates it twice (`lastRequest`, then `updatedAt`), each its own statement
 * and commit, before it answers, with the rate limit off too; `deferUpdates` moves those writes after the answer
 * only with storage "secondary-storage", so it is not used here.
 */
import { apiKey } from "@better-auth/api-key";
import { betterAuth } from "better-auth";
import type { Pool } from "pg";

/** The options, apart so that better-auth's migration can run on them before the instance checks its schema. */
export function peerAuthOptions(pool: Pool) {
  return {
    database: pool,
    // A fixed secret is enough for a benchmark: nothing it signs leaves the machine.
    secret: "keyhaven-bench-peer-secret-0123456789abcdef",
    baseURL: "http://127.0.0.1",
    telemetry: { enabled: false },
    rateLimit: { enabled: false },
    logger: { level: "error" as const },
    plugins: [apiKey({ rateLimit: { enabled: false } })],
  };
}

export function createPeerAuth(pool: Pool) {
  return betterAuth(peerAuthOptions(pool));
}

export type PeerAuth = ReturnType<typeof createPeerAuth>;
