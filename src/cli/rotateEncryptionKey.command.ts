import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig, readEncryptionKeyFile } from "../config.js";
import { embeddedKeyFile, writeKeyFile } from "../keyring/masterKey.js";
import { fingerprint } from "../crypto/vault.js";
import { RotationError } from "../keyring/masterKey.rotate.js";
import { WriteGate } from "../core/changes.js";
import { rotateEncryptionKey } from "../core/encryptionKey/encryptionKey.core.js";
import { systemClock } from "../clock.js";
import { cliCaller } from "./cli.caller.js";
import { openStore } from "../main.js";

export const ROTATE_HELP = `Usage: keyhaven rotate-encryption-key --new-key-file <path>

Re-wraps every workspace's data keys from the current encryption key to a new one, in one transaction (all or
nothing). Stored plaintext keys are not re-encrypted: they are sealed with the data keys, which stay the same.

  current key   KEYHAVEN_ENCRYPTION_KEY or KEYHAVEN_ENCRYPTION_KEY_FILE, or the embedded store's
                <KEYHAVEN_DATA_DIR>/encryption.key
  new key       read from <path>: 32 bytes as base64 (make one with: openssl rand -base64 32 > new.key)

Embedded store (no DATABASE_URL): stop the server first (while it runs, its data directory is locked and this
command exits 1 naming it); the new key is written into <KEYHAVEN_DATA_DIR>/encryption.key (mode 0600, replacing
the file, never writing through a symlink) once the database is updated.
With DATABASE_URL: afterwards restart every replica with KEYHAVEN_ENCRYPTION_KEY set to the new key, then run
this command once more (same environment, same file): it re-wraps any data key that a replica still on the old
key created in between, and reports 0 otherwise. Running it again is always safe.

Exit codes: 0 done, 1 failed (nothing was changed), 2 usage error.
`;

/** `keyhaven rotate-encryption-key`; returns the exit code. */
export async function rotateEncryptionKeyCommand(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { "new-key-file": { type: "string" }, help: { type: "boolean", short: "h" } },
    }));
  } catch (err) {
    console.error(`keyhaven rotate-encryption-key: ${(err as Error).message}\n\n${ROTATE_HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(ROTATE_HELP);
    return 0;
  }
  const file = values["new-key-file"];
  if (!file) {
    console.error(`keyhaven rotate-encryption-key: --new-key-file is required\n\n${ROTATE_HELP}`);
    return 2;
  }

  let config;
  try {
    config = loadConfig();
  } catch (err) {
    console.error(`keyhaven rotate-encryption-key: ${(err as Error).message}`);
    return 2;
  }
  let newKey: Buffer;
  let oldKey: Buffer | undefined;
  const keyFile = config.encryptionKey ? undefined : embeddedKeyFile(config);
  try {
    // The new key obeys the same rule as KEYHAVEN_ENCRYPTION_KEY, checked by the same function.
    newKey = readEncryptionKeyFile(file);
    oldKey = config.encryptionKey ?? (keyFile && existsSync(keyFile) ? readEncryptionKeyFile(keyFile) : undefined);
  } catch (err) {
    console.error(`keyhaven rotate-encryption-key: ${(err as Error).message}`);
    return 2;
  }
  if (!oldKey) {
    console.error(
      "keyhaven rotate-encryption-key: no current encryption key: set KEYHAVEN_ENCRYPTION_KEY (or KEYHAVEN_ENCRYPTION_KEY_FILE) " +
        "to the key the data is encrypted with" +
        (keyFile ? ` (or keep it in ${keyFile})` : ""),
    );
    return 2;
  }

  const store = await openStore(config);
  try {
    // Through the write gate: the re-wrap and its audit entry (encryptionKey.rotate, by this command) commit together.
    const result = await rotateEncryptionKey(
      { changes: new WriteGate(store.db, systemClock) },
      cliCaller("rotate-encryption-key"),
      oldKey,
      newKey,
    );
    console.log(
      `re-wrapped ${result.rewrapped} data key(s) under the new encryption key (fingerprint ${fingerprint(newKey)})` +
        (result.alreadyRotated ? `; ${result.alreadyRotated} already were` : ""),
    );
    if (keyFile) {
      try {
        writeKeyFile(keyFile, newKey, { replace: true });
      } catch (err) {
        console.error(
          `keyhaven rotate-encryption-key: the data keys are now under the new key, but ${keyFile} could not be ` +
            `replaced (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): copy ${file} there, with mode 0600, before starting keyhaven`,
        );
        return 1;
      }
      console.log(`${path.resolve(keyFile)} now holds the new key (mode 0600); back it up with the data directory.`);
    } else {
      console.log(
        "Now restart every replica with the new key (in KEYHAVEN_ENCRYPTION_KEY, or the file KEYHAVEN_ENCRYPTION_KEY_FILE names), " +
          "then run this command once more.\n" +
          "Keep the old key as long as backups taken before this rotation are kept: they need it.",
      );
    }
    return 0;
  } catch (err) {
    console.error(`keyhaven rotate-encryption-key: ${err instanceof RotationError ? err.message : String(err)}`);
    return 1;
  } finally {
    await store.close();
  }
}
