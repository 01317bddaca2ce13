import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { randomSlice } from "../ids.js";

const ALGORITHM = "aes-256-gcm";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** AES-256-GCM; returns base64(nonce ‖ ciphertext ‖ tag). `aad` binds the ciphertext to where it is stored. */
export function seal(key: Buffer, plaintext: Buffer, aad: string): string {
  const nonce = randomSlice(NONCE_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, nonce);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64");
}

export function open(key: Buffer, sealed: string, aad: string): Buffer {
  const raw = Buffer.from(sealed, "base64");
  if (raw.length < NONCE_BYTES + TAG_BYTES) throw new Error("sealed value is too short");
  const decipher = createDecipheriv(ALGORITHM, key, raw.subarray(0, NONCE_BYTES));
  decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
  return Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
}

/** A short, non-secret name for a master key, stored beside what it wraps. */
export function fingerprint(masterKey: Buffer): string {
  return createHash("sha256").update(masterKey).digest("hex").slice(0, 16);
}

export function newDataKey(): Buffer {
  return randomBytes(32);
}
