import { createHash, timingSafeEqual } from "node:crypto";

/** SHA-256 of the UTF-8 key, standard padded base64: the `sha256_base64` variant of v1. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("base64");
}

/** SHA-256 of the UTF-8 text, lowercase hex: the `longTokenHash` of github.com/seamapi/prefixed-api-key. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** Constant-time equality of two secrets of any length. */
export function secretsEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a).digest();
  const hb = createHash("sha256").update(b).digest();
  return timingSafeEqual(ha, hb);
}
