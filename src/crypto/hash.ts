import { createHash, timingSafeEqual } from "node:crypto";

/** SHA-256 of the UTF-8 key, standard padded base64: the `sha256_base64` variant of v1. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("base64");
}

/** Constant-time equality of two secrets of any length. */
export function secretsEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a).digest();
  const hb = createHash("sha256").update(b).digest();
  return timingSafeEqual(ha, hb);
}
