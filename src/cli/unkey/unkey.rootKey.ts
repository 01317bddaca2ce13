/**
 * Where the Unkey root key of `keyhaven import --from-unkey` comes from: `--unkey-root-key-file <path>` (wins, being
 * the explicit choice) or the UNKEY_ROOT_KEY environment variable; never the command line itself, where other users
 * of the machine would see it. No message here ever holds the key or any part of the file.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { isHeaderSafe } from "../http.js";

/** A root key is a few dozen characters: a file larger than this is not one (and is not read whole). */
const MAX_FILE_BYTES = 4096;

/** The root key could not be had; the message says why and never shows the key or the file's content. */
export class UnkeyRootKeyError extends Error {
  override readonly name = "UnkeyRootKeyError";
}

export function resolveUnkeyRootKey(source: { env?: NodeJS.ProcessEnv; file?: string | undefined } = {}): string {
  const env = source.env ?? process.env;
  let key: string;
  let from: string;
  if (source.file !== undefined) {
    from = `--unkey-root-key-file ${source.file}`;
    key = readKeyFile(source.file, from).trim();
    if (key === "") throw new UnkeyRootKeyError(`${from}: the file is empty`);
  } else {
    from = "UNKEY_ROOT_KEY";
    key = env.UNKEY_ROOT_KEY?.trim() ?? "";
    if (key === "") {
      throw new UnkeyRootKeyError("an Unkey root key is required: set UNKEY_ROOT_KEY or pass --unkey-root-key-file <path>");
    }
  }
  if (!isHeaderSafe(key)) {
    // A pasted value with a line break may hold more than the key: nothing of it is shown.
    throw new UnkeyRootKeyError(
      `${from}: the root key contains a line break, a control character or a character outside Latin-1, so it cannot ` +
        "be sent in an HTTP header (the value is not shown)",
    );
  }
  return key;
}

function readKeyFile(file: string, from: string): string {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (err) {
    throw new UnkeyRootKeyError(`${from}: cannot open it (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  try {
    if (!fstatSync(fd).isFile()) throw new UnkeyRootKeyError(`${from}: not a regular file`);
    const buffer = Buffer.alloc(MAX_FILE_BYTES + 1);
    let length = 0;
    for (;;) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
      if (length > MAX_FILE_BYTES) throw new UnkeyRootKeyError(`${from}: larger than ${MAX_FILE_BYTES} bytes, so not a root key`);
    }
    return buffer.subarray(0, length).toString("utf8");
  } catch (err) {
    if (err instanceof UnkeyRootKeyError) throw err;
    throw new UnkeyRootKeyError(`${from}: cannot read it (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  } finally {
    closeSync(fd);
  }
}
