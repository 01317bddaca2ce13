import type { Config } from "./config.js";
import type { Keyring } from "./crypto/keyring.js";
import type { Db, Store } from "./db/client.js";
import type { RateLimiter } from "./ratelimit/ratelimiter.js";

/** Everything a handler may use, passed down explicitly from main.ts (or the test harness). */
export type Deps = {
  config: Config;
  store: Store;
  db: Db;
  keyring: Keyring;
  /** Rate-limit counters: process memory, or Redis (REDIS_URL) shared by every replica. */
  ratelimiter: RateLimiter;
};
