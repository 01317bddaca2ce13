import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { hashKey, secretsEqual, sha256Hex } from "../src/crypto/hash.js";
import { counterId } from "../src/storage/ratelimits/ratelimiter.window.js";
import { generateKey } from "../src/crypto/keyGen.js";
import { Keyring } from "../src/keyring/keyring.js";
import { KeyringError } from "../src/keyring/keyring.errors.js";
import type { Db } from "../src/storage/client.js";
import { ApiError } from "../src/http/errors.js";
import { open, seal } from "../src/crypto/vault.js";
import { newId, randomSlice } from "../src/ids.js";
import { randomBytes } from "node:crypto";

describe("hashing", () => {
  it("matches v1's sha256_base64 test vector", () => {
    expect(hashKey("MVgWNsyPmv6VthC9moCNAPwS")).toBe("CptSN3vQ0shZLIsdT5c/tlpeFK/qqxY0R/aQNCfKhWs=");
  });

  // The digests below were computed with createHash(...).update(text) before hashing moved to crypto.hash: stored key
  // hashes, prefixed-api-key hashes and Redis counter ids of earlier versions must still match.
  it("hashes keys, tokens and counters as UTF-8, as stored by earlier versions", () => {
    expect(hashKey("sk_é€😀")).toBe("EXNAwHlmpl3SW7674Y2JyEOGjrTgfteOnO8OuYb/6dw=");
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const check = { workspaceId: "ws_1", name: "api.requests", identifier: "user_ä", limit: 10, duration: 60_000, cost: 1 };
    expect(counterId(check, 29_000_000)).toBe("rFpdvWSLKnLAS4YJ6FSD3k");
    expect(secretsEqual("sk_é€😀", "sk_é€😀")).toBe(true);
    expect(secretsEqual("sk_é€😀", "sk_é€😁")).toBe(false);
    expect(secretsEqual("short", "a much longer secret")).toBe(false);
  });
});

describe("sealing with AES-256-GCM", () => {
  const key = randomBytes(32);

  it("opens what it sealed, and never produces the same ciphertext twice", () => {
    const sealed = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const s = seal(key, Buffer.from("the same secret"), "ws:key");
      expect(open(key, s, "ws:key").toString()).toBe("the same secret");
      sealed.add(s);
    }
    expect(sealed.size).toBe(2000);
  });

  it("refuses a ciphertext opened with other associated data, another key, or a changed byte", () => {
    const s = seal(key, Buffer.from("secret"), "ws:key_a");
    expect(() => open(key, s, "ws:key_b")).toThrow();
    expect(() => open(randomBytes(32), s, "ws:key_a")).toThrow();
    const raw = Buffer.from(s, "base64");
    raw[14]! ^= 1;
    expect(() => open(key, raw.toString("base64"), "ws:key_a")).toThrow();
    expect(() => open(key, "c2hvcnQ=", "ws:key_a")).toThrow(/too short/);
  });
});

describe("ids and random bytes", () => {
  it("makes unique, prefixed, base58 ids that sort by creation second", () => {
    const ids = Array.from({ length: 20_000 }, () => newId("key"));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 100)) {
      expect(id).toMatch(/^key_[1-9A-HJ-NP-Za-km-z]+$/);
      expect(bs58.decode(id.slice(4))).toHaveLength(12);
    }
  });

  it("hands out slices that stay unchanged after the pool is refilled", () => {
    const first = randomSlice(16);
    const copy = Buffer.from(first);
    for (let i = 0; i < 5000; i++) randomSlice(16);
    expect(first.equals(copy)).toBe(true);
    expect(randomSlice(20_000)).toHaveLength(20_000);
  });
});

describe("generated keys", () => {
  it("are prefix_ plus base58 of version 1, the length byte and that many random bytes", () => {
    const key = generateKey("sk", 16);
    expect(key).toMatch(/^sk_[1-9A-HJ-NP-Za-km-z]+$/);
    const bytes = bs58.decode(key.slice(3));
    expect(bytes[0]).toBe(1);
    expect(bytes[1]).toBe(16);
    expect(bytes).toHaveLength(18);
    expect(generateKey(undefined, 32)).not.toContain("_");
  });
});

describe("the keyring's refusals", () => {
  it("are domain errors, not HTTP errors: the adapter (app.ts) answers them 412", async () => {
    const keyring = new Keyring(undefined);
    const db = {} as Db; // never reached: the missing key is refused first
    for (const call of [() => keyring.dataKeyFor(db, "ws_x"), () => keyring.decrypt(db, "ws_x", "dek_x", "key_x", "sealed")]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KeyringError);
      expect(err).not.toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ reason: "NO_ENCRYPTION_KEY", message: expect.stringMatching(/KEYHAVEN_ENCRYPTION_KEY/) });
    }
  });
});
