import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { type Config, ConfigError, readEncryptionKeyFile } from "../config.js";

export type MasterKey = {
  key: Buffer | undefined;
  source: string;
  /** Problems that do not stop the start, e.g. a key file other users can read: shown at start. */
  warnings: string[];
};

/** The embedded store's key file: `<KEYHAVEN_DATA_DIR>/encryption.key`. */
export function embeddedKeyFile(config: Config): string | undefined {
  return config.databaseUrl || config.dataDir.startsWith("memory://") ? undefined : path.join(config.dataDir, "encryption.key");
}

/**
 * The key that wraps every workspace's data keys. Set it with KEYHAVEN_ENCRYPTION_KEY or KEYHAVEN_ENCRYPTION_KEY_FILE;
 * in embedded mode without either, one is generated on first start and kept beside the data (mode 0600). With
 * DATABASE_URL and no key there is none, and storing plaintext keys is refused with a 412.
 */
export function resolveMasterKey(config: Config): MasterKey {
  if (config.encryptionKeyFile) {
    return {
      key: config.encryptionKey,
      source: `KEYHAVEN_ENCRYPTION_KEY_FILE (${path.resolve(config.encryptionKeyFile)})`,
      warnings: exposureWarnings(config.encryptionKeyFile),
    };
  }
  if (config.encryptionKey) return { key: config.encryptionKey, source: "KEYHAVEN_ENCRYPTION_KEY", warnings: [] };
  if (config.databaseUrl) {
    return {
      key: undefined,
      source: "none: KEYHAVEN_ENCRYPTION_KEY is not set, so importing plaintext keys is refused (412)",
      warnings: [],
    };
  }
  if (config.dataDir.startsWith("memory://")) {
    return { key: randomBytes(32), source: "generated for this process only (in-memory store)", warnings: [] };
  }
  // On a fresh clone the data directory does not exist yet: the key is resolved before the store is opened.
  mkdirSync(config.dataDir, { recursive: true });
  const file = embeddedKeyFile(config)!;
  if (existsSync(file)) {
    let key: Buffer;
    try {
      key = readEncryptionKeyFile(file);
    } catch (err) {
      throw new ConfigError(
        `${(err as Error).message}; restore it from a backup (or, if it is lost, see \`keyhaven reset-encryption-key --help\`)`,
      );
    }
    return { key, source: `${path.resolve(file)} (back it up with the data directory)`, warnings: exposureWarnings(file) };
  }
  const key = randomBytes(32);
  writeKeyFile(file, key, { replace: false });
  return {
    key,
    source: `generated into ${path.resolve(file)} (mode 0600; back it up with the data directory)`,
    warnings: [],
  };
}

/** A key file that group or others may read is a secret open to every account on the machine. */
function exposureWarnings(file: string): string[] {
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) === 0) return [];
  return [
    `the encryption key file ${path.resolve(file)} can be read by other users (mode 0${mode.toString(8)}); ` +
      `restrict it with: chmod 600 ${path.resolve(file)}`,
  ];
}

/**
 * Writes a key file with mode 0600, whole or not at all, never through a symlink: the key goes into `<file>.new`,
 * created exclusively (O_EXCL also refuses a symlink planted there), is synced, then renamed over `file` (a rename
 * replaces a symlink at `file` itself, not what it points to). A `.new` left by a crash is removed first.
 * `replace: false` creates `file` only if nothing is there (a hard link, which fails on an existing name).
 */
export function writeKeyFile(file: string, key: Buffer, { replace }: { replace: boolean }): void {
  const temp = `${file}.new`;
  try {
    unlinkSync(temp);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${key.toString("base64")}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  if (replace) {
    renameSync(temp, file);
  } else {
    try {
      linkSync(temp, file);
    } finally {
      unlinkSync(temp);
    }
  }
  const dir = openSync(path.dirname(file), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
