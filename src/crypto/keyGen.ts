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

/**
 * A v2 key (v2 contract §11.1): `[prefix_]base58(byteLength random bytes)`, Bitcoin alphabet (bs58, which also
 * encodes v1's keys), with no version or length header; and its `start` (§11.3): `prefix_` (the API's default
 * prefix included) and the first four base58 characters.
 */
export function generateKeyV2(prefix: string | undefined, byteLength = 16): { key: string; start: string } {
  const secret = bs58.encode(randomBytes(byteLength));
  const head = prefix ? `${prefix}_` : "";
  return { key: `${head}${secret}`, start: `${head}${secret.slice(0, 4)}` };
}
