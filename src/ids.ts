import { randomBytes } from "node:crypto";
import bs58 from "bs58";

const EPOCH_SECONDS = 1_700_000_000;

export type IdPrefix = "key" | "api" | "id" | "perm" | "role" | "rl" | "req" | "ws" | "rk" | "dek";

/** `<prefix>_<base58(4-byte seconds since 2023-11-14 ‖ 8 random bytes)>`: sortable by creation second. */
export function newId(prefix: IdPrefix): string {
  const buf = randomBytes(12);
  buf.writeUInt32BE(Math.max(0, Math.floor(Date.now() / 1000) - EPOCH_SECONDS), 0);
  return `${prefix}_${bs58.encode(buf)}`;
}
