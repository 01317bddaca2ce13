import { randomBytes } from "node:crypto";
import bs58 from "bs58";

/** A v1 key: `[prefix_]base58(0x01 ‖ byteLength ‖ byteLength random bytes)`. */
export function generateKey(prefix: string | undefined, byteLength = 16): string {
  const buf = Buffer.alloc(byteLength + 2);
  buf[0] = 1;
  buf[1] = byteLength;
  randomBytes(byteLength).copy(buf, 2);
  const secret = bs58.encode(buf);
  return prefix ? `${prefix}_${secret}` : secret;
}
