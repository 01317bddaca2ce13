import { hash, timingSafeEqual } from "node:crypto";

// crypto.hash, one call for a whole input, costs a quarter of createHash().update().digest() on short strings (no
// Hash object): every verification hashes its key (issue 13 §0). Strings are hashed as UTF-8 by both.

/** SHA-256 of the UTF-8 key, standard padded base64: the `sha256_base64` variant of v1. */
export function hashKey(key: string): string {
  return hash("sha256", key, "base64");
}

/** SHA-256 of the UTF-8 text, lowercase hex: the `longTokenHash` of github.com/seamapi/prefixed-api-key. */
export function sha256Hex(text: string): string {
  return hash("sha256", text, "hex");
}

/** Constant-time equality of two secrets of any length. */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash("sha256", a, "buffer"), hash("sha256", b, "buffer"));
}
