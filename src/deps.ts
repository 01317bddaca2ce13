import type { Config } from "./config.js";
import type { Keyring } from "./crypto/keyring.js";
import type { Db, Store } from "./db/client.js";

/** Everything a handler may use, passed down explicitly from main.ts (or the test harness). */
export type Deps = {
  config: Config;
  store: Store;
  db: Db;
  keyring: Keyring;
};
