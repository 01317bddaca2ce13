import { randomBytes } from "node:crypto";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../config.js";
import { embeddedKeyFile, writeKeyFile } from "../keyring/masterKey.js";
import { WriteGate } from "../core/changes.js";
import { resetEncryptionKey } from "../core/encryptionKey/encryptionKey.core.js";
import { systemClock } from "../clock.js";
import { cliCaller } from "./cli.caller.js";
import { openStore } from "../main.js";

const CONFIRM = "delete-stored-plaintexts";

export const RESET_HELP = `Usage: keyhaven reset-encryption-key --${CONFIRM}

The way out when the encryption key (KEYHAVEN_ENCRYPTION_KEY, KEYHAVEN_ENCRYPTION_KEY_FILE or the embedded
store's encryption.key) is lost and keyhaven refuses to start. Stop every keyhaven process first. The current key
is not needed and not read.

Deleted, for good, in one transaction:
  - every stored plaintext key: keys.getKey and apis.listKeys with decrypt=true no longer return them (keys
    imported by plaintext and keys created with recoverable: true);
  - every workspace data key;
  - the sealed plaintexts of enqueued import batches not yet processed (their keys are still imported, as by hash).
Kept: every key with its hash and settings, so verification works exactly as before; root keys; everything else.

Afterwards keyhaven starts with any new key. Embedded store: a new <KEYHAVEN_DATA_DIR>/encryption.key is written
(mode 0600; used unless KEYHAVEN_ENCRYPTION_KEY or KEYHAVEN_ENCRYPTION_KEY_FILE is set). With DATABASE_URL:
generate a new key once (openssl rand -base64 32), keep it in your secret store, and start every replica with it.

Exit codes: 0 done, 1 failed (nothing was changed), 2 usage error (nothing was changed).
`;

/** `keyhaven reset-encryption-key`; returns the exit code. */
export async function resetEncryptionKeyCommand(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { [CONFIRM]: { type: "boolean" }, help: { type: "boolean", short: "h" } },
    }));
  } catch (err) {
    console.error(`keyhaven reset-encryption-key: ${(err as Error).message}\n\n${RESET_HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(RESET_HELP);
    return 0;
  }
  if (!values[CONFIRM]) {
    console.error(
      `keyhaven reset-encryption-key: this deletes every stored plaintext key for good; pass --${CONFIRM} to confirm\n\n${RESET_HELP}`,
    );
    return 2;
  }
  let config;
  try {
    // The lost key's variables are not read: a key file that is gone must not stop its reset.
    config = loadConfig(process.env, { ignoreEncryptionKey: true });
  } catch (err) {
    console.error(`keyhaven reset-encryption-key: ${(err as Error).message}`);
    return 2;
  }
  const store = await openStore(config);
  let result;
  try {
    // Through the write gate: what is forgotten and its audit entry (encryptionKey.reset) commit together.
    result = await resetEncryptionKey({ changes: new WriteGate(store.db, systemClock) }, cliCaller("reset-encryption-key"));
  } catch (err) {
    console.error(`keyhaven reset-encryption-key: nothing was changed: ${(err as Error).message}`);
    return 1;
  } finally {
    await store.close();
  }
  console.log(
    `deleted ${result.plaintexts} stored plaintext(s) and ${result.dataKeys} data key(s); ` +
      `${result.queuedPlaintexts} enqueued key(s) will be imported without their plaintext; ` +
      `${result.webhookSecrets} webhook endpoint(s) lost their signing secret and were disabled. Verification is unaffected.`,
  );
  const keyFile = embeddedKeyFile(config);
  if (keyFile) {
    writeKeyFile(keyFile, randomBytes(32), { replace: true });
    console.log(
      `${path.resolve(keyFile)} now holds a new key (mode 0600; back it up with the data directory). ` +
        "It is used unless KEYHAVEN_ENCRYPTION_KEY or KEYHAVEN_ENCRYPTION_KEY_FILE is set.",
    );
  } else {
    console.log(
      "Start keyhaven with a new key: generate it once (openssl rand -base64 32), keep it in your secret store, and " +
        "give every replica the same one (KEYHAVEN_ENCRYPTION_KEY or KEYHAVEN_ENCRYPTION_KEY_FILE).",
    );
  }
  return 0;
}
