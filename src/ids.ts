import { randomBytes } from "node:crypto";
import bs58 from "bs58";

const EPOCH_SECONDS = 1_700_000_000;
const POOL_BYTES = 8192;
let pool = Buffer.alloc(0);
let poolOffset = 0;

/**
 * `n` fresh random bytes from a pool refilled 8 KiB at a time: one call into the kernel per ~600 ids instead of
 * one per id, which matters when an import makes hundreds of ids and nonces. Slices never overlap, and a spent
 * pool is replaced, never overwritten, so a slice handed out stays as it was.
 */
export function randomSlice(n: number): Buffer {
  if (poolOffset + n > pool.length) {
    pool = randomBytes(Math.max(POOL_BYTES, n));
    poolOffset = 0;
  }
  const slice = pool.subarray(poolOffset, poolOffset + n);
  poolOffset += n;
  return slice;
}

export type IdPrefix =
  | "key"
  | "api"
  | "id"
  | "perm"
  | "role"
  | "rl"
  | "rlns"
  | "rlor"
  | "req"
  | "ws"
  | "rk"
  | "dek"
  | "audit"
  | "wh"
  | "msg"
  | "pc"
  | "ps";

/** `<prefix>_<base58(4-byte seconds since 2023-11-14 ‖ 8 random bytes)>`: sortable by creation second. */
export function newId(prefix: IdPrefix): string {
  const buf = Buffer.allocUnsafe(12);
  buf.writeUInt32BE(Math.max(0, Math.floor(Date.now() / 1000) - EPOCH_SECONDS), 0);
  randomSlice(8).copy(buf, 4);
  return `${prefix}_${bs58.encode(buf)}`;
}
