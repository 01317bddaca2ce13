import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Config } from "../config.js";

export type MasterKey = { key: Buffer | undefined; source: string };

/**
 * The key that wraps every workspace's data keys. Set it with KEYHAVEN_ENCRYPTION_KEY; in embedded mode without
 * it, one is generated on first start and kept beside the data (mode 0600). With DATABASE_URL and no key there is
 * none, and storing plaintext keys is refused with a 412.
 */
export function resolveMasterKey(config: Config): MasterKey {
  if (config.encryptionKey) return { key: config.encryptionKey, source: "KEYHAVEN_ENCRYPTION_KEY" };
  if (config.databaseUrl) {
    return {
      key: undefined,
      source: "none: KEYHAVEN_ENCRYPTION_KEY is not set, so importing plaintext keys is refused (412)",
    };
  }
  if (config.dataDir.startsWith("memory://")) {
    return { key: randomBytes(32), source: "generated for this process only (in-memory store)" };
  }
  // On a fresh clone the data directory does not exist yet: the key is resolved before the store is opened.
  mkdirSync(config.dataDir, { recursive: true });
  const file = path.join(config.dataDir, "encryption.key");
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, "utf8").trim(), "base64");
    if (key.length !== 32) throw new Error(`${file} does not hold 32 bytes of base64; restore it or remove the data directory`);
    return { key, source: `${path.resolve(file)} (back it up with the data directory)` };
  }
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  chmodSync(file, 0o600);
  return { key, source: `generated into ${path.resolve(file)} (mode 0600; back it up with the data directory)` };
}
