import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";

const validKey = randomBytes(32).toString("base64");

/** Loads `env` and returns the ConfigError it must throw. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig(${JSON.stringify(env)}) did not throw`);
}

describe("loadConfig", () => {
  it("uses port 8080, ./.keyhaven and log level info when nothing is set", () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.dataDir).toBe("./.keyhaven");
    expect(config.logLevel).toBe("info");
    expect(config.databaseUrl).toBeUndefined();
    expect(config.rootKey).toBeUndefined();
    expect(config.adminToken).toBeUndefined();
    expect(config.encryptionKey).toBeUndefined();
    expect(config.publicUrl).toBeUndefined();
    expect(config.ratelimitCountersPerWorkspace).toBe(100_000);
  });

  it("reads every variable it knows", () => {
    const config = loadConfig({
      PORT: "3000",
      HOST: "0.0.0.0",
      DATABASE_URL: "postgresql://user:pw@db:5432/keys",
      DATABASE_POOL_SIZE: "10",
      KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE: "250000",
      KEYHAVEN_DATA_DIR: "/var/lib/keyhaven",
      KEYHAVEN_ROOT_KEY: "a-root-key-of-enough-length",
      KEYHAVEN_ADMIN_TOKEN: "an-admin-token-of-enough-length",
      KEYHAVEN_ENCRYPTION_KEY: validKey,
      KEYHAVEN_PUBLIC_URL: "https://keys.example.com/",
      LOG_LEVEL: "debug",
    });
    expect(config).toMatchObject({
      port: 3000,
      host: "0.0.0.0",
      databaseUrl: "postgresql://user:pw@db:5432/keys",
      databasePoolSize: 10,
      ratelimitCountersPerWorkspace: 250_000,
      dataDir: "/var/lib/keyhaven",
      rootKey: "a-root-key-of-enough-length",
      adminToken: "an-admin-token-of-enough-length",
      publicUrl: "https://keys.example.com",
      logLevel: "debug",
    });
    expect(config.encryptionKey?.equals(Buffer.from(validKey, "base64"))).toBe(true);
  });

  it.each([
    ["PORT", "is not a number", "abc"],
    ["PORT", "is above 65535", "70000"],
    ["PORT", "is negative", "-1"],
    ["DATABASE_URL", "is not a postgres URL", "mysql://x"],
    ["KEYHAVEN_ENCRYPTION_KEY", "is base64 of fewer than 32 bytes", "c2hvcnQ="],
    ["KEYHAVEN_ENCRYPTION_KEY", "is base64 of more than 32 bytes", randomBytes(48).toString("base64")],
    ["KEYHAVEN_ENCRYPTION_KEY", "is hex rather than base64", randomBytes(32).toString("hex")],
    ["KEYHAVEN_ENCRYPTION_KEY", "holds characters outside base64", `!!!!${validKey}`],
    ["KEYHAVEN_ROOT_KEY", "is shorter than 16 characters", "too-short"],
    ["KEYHAVEN_ADMIN_TOKEN", "is shorter than 16 characters", "too-short"],
    ["LOG_LEVEL", "is not a pino level", "loud"],
    ["KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE", "is below 100", "99"],
    ["KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE", "is above 10,000,000", "10000001"],
    ["KEYHAVEN_PUBLIC_URL", "has a path", "https://keys.example.com/api"],
    ["KEYHAVEN_PUBLIC_URL", "has a query", "https://keys.example.com?x=1"],
    ["KEYHAVEN_PUBLIC_URL", "has no scheme", "keys.example.com"],
  ])("refuses %s when its value %s, with a ConfigError naming the variable", (name, _why, value) => {
    const err = configError({ [name]: value });
    expect(err.message).toContain(`${name}:`);
  });

  it("bounds slow clients by default: headers 10 s, whole request 30 s, idle keep-alive 30 s, 10,000 connections", () => {
    expect(loadConfig({}).http).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 30_000,
      maxConnections: 10_000,
    });
    expect(
      loadConfig({
        KEYHAVEN_HEADERS_TIMEOUT_MS: "2000",
        KEYHAVEN_REQUEST_TIMEOUT_MS: "5000",
        KEYHAVEN_KEEP_ALIVE_TIMEOUT_MS: "65000",
        KEYHAVEN_MAX_CONNECTIONS: "50",
      }).http,
    ).toEqual({ headersTimeoutMs: 2000, requestTimeoutMs: 5000, keepAliveTimeoutMs: 65_000, maxConnections: 50 });
  });

  it("refuses client timeouts that are not bounded, or headers allowed longer than the whole request", () => {
    for (const value of ["0", "99", "600001", "1.5", "ten"]) {
      expect(configError({ KEYHAVEN_REQUEST_TIMEOUT_MS: value }).message).toMatch(/KEYHAVEN_REQUEST_TIMEOUT_MS: /);
    }
    expect(configError({ KEYHAVEN_MAX_CONNECTIONS: "0" }).message).toMatch(/KEYHAVEN_MAX_CONNECTIONS: /);
    expect(configError({ KEYHAVEN_HEADERS_TIMEOUT_MS: "20000", KEYHAVEN_REQUEST_TIMEOUT_MS: "10000" }).message).toBe(
      "invalid environment:\n  KEYHAVEN_HEADERS_TIMEOUT_MS: must not exceed KEYHAVEN_REQUEST_TIMEOUT_MS (the headers are part of the request)",
    );
  });

  it("names every bad variable at once", () => {
    const err = configError({ PORT: "abc", LOG_LEVEL: "loud", KEYHAVEN_ADMIN_TOKEN: "short" });
    expect(err.message).toContain("PORT:");
    expect(err.message).toContain("LOG_LEVEL:");
    expect(err.message).toContain("KEYHAVEN_ADMIN_TOKEN:");
  });

  it("treats empty variables as unset, so their defaults apply", () => {
    const config = loadConfig({
      PORT: "",
      HOST: "",
      DATABASE_URL: "",
      DATABASE_POOL_SIZE: "",
      KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE: "",
      KEYHAVEN_DATA_DIR: "",
      KEYHAVEN_ROOT_KEY: "",
      KEYHAVEN_ADMIN_TOKEN: "",
      KEYHAVEN_ENCRYPTION_KEY: "",
      KEYHAVEN_PUBLIC_URL: "",
      LOG_LEVEL: "",
    });
    expect(config).toEqual(loadConfig({}));
    expect(config.port).toBe(8080);
    expect(config.databaseUrl).toBeUndefined();
    expect(config.rootKey).toBeUndefined();
    expect(config.adminToken).toBeUndefined();
    expect(config.encryptionKey).toBeUndefined();
  });

  it("reads KEYHAVEN_VERIFY_REQUIRE_SCOPE (off by default) and KEYHAVEN_ANALYTICS_RETENTION_DAYS (90 by default)", () => {
    expect(loadConfig({})).toMatchObject({ verifyRequireScope: false, analyticsRetentionDays: 90 });
    expect(loadConfig({ KEYHAVEN_VERIFY_REQUIRE_SCOPE: "on", KEYHAVEN_ANALYTICS_RETENTION_DAYS: "7" })).toMatchObject({
      verifyRequireScope: true,
      analyticsRetentionDays: 7,
    });
    expect(configError({ KEYHAVEN_VERIFY_REQUIRE_SCOPE: "yes" }).message).toContain('KEYHAVEN_VERIFY_REQUIRE_SCOPE: must be "on" or "off"');
    for (const days of ["0", "1.5", "ninety", "36501"]) {
      expect(configError({ KEYHAVEN_ANALYTICS_RETENTION_DAYS: days }).message).toMatch(/KEYHAVEN_ANALYTICS_RETENTION_DAYS: must be/);
    }
  });

  it("reads the verification log's KEYHAVEN_VERIFICATION_LOG_DAYS (7; 0, or KEYHAVEN_ANALYTICS=off, means no log), _MAX_ROWS (1,000,000 on PostgreSQL, 100,000 embedded) and KEYHAVEN_REGION (the hostname, 64 characters at most)", () => {
    const host = os.hostname().trim().slice(0, 64);
    const postgresUrl = { DATABASE_URL: "postgres://keyhaven@db.internal:5432/keyhaven" };
    // No DATABASE_URL: the embedded store, whose one thread a query over the whole log holds (docs/benchmarks.md).
    expect(loadConfig({})).toMatchObject({
      verificationLogDays: 7,
      verificationLogMaxRows: 100_000,
      region: host === "" ? "keyhaven" : host,
    });
    expect(loadConfig(postgresUrl).verificationLogMaxRows).toBe(1_000_000);
    // The variable sets it on either store.
    for (const store of [{}, postgresUrl]) {
      expect(loadConfig({ ...store, KEYHAVEN_VERIFICATION_LOG_MAX_ROWS: "1000000" }).verificationLogMaxRows).toBe(1_000_000);
      expect(loadConfig({ ...store, KEYHAVEN_VERIFICATION_LOG_MAX_ROWS: "5000" }).verificationLogMaxRows).toBe(5000);
    }
    expect(
      loadConfig({ KEYHAVEN_VERIFICATION_LOG_DAYS: "30", KEYHAVEN_VERIFICATION_LOG_MAX_ROWS: "5000", KEYHAVEN_REGION: " eu-west-1 " }),
    ).toMatchObject({ verificationLogDays: 30, verificationLogMaxRows: 5000, region: "eu-west-1" });
    expect(loadConfig({ KEYHAVEN_VERIFICATION_LOG_DAYS: "0" }).verificationLogDays).toBe(0);
    expect(loadConfig({ KEYHAVEN_VERIFICATION_LOG_DAYS: "30", KEYHAVEN_ANALYTICS: "off" }).verificationLogDays).toBe(0);
    expect(loadConfig({ KEYHAVEN_REGION: "r".repeat(64) }).region).toBe("r".repeat(64));
    expect(configError({ KEYHAVEN_REGION: "r".repeat(65) }).message).toContain("KEYHAVEN_REGION: must be at most 64 characters");
    for (const days of ["-1", "1.5", "seven", "36501"]) {
      expect(configError({ KEYHAVEN_VERIFICATION_LOG_DAYS: days }).message).toMatch(/KEYHAVEN_VERIFICATION_LOG_DAYS: must be/);
    }
    for (const rows of ["0", "2.5", "many", "1000000001"]) {
      expect(configError({ KEYHAVEN_VERIFICATION_LOG_MAX_ROWS: rows }).message).toMatch(/KEYHAVEN_VERIFICATION_LOG_MAX_ROWS: must be/);
    }
  });

  it("reads KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE, ad-hoc limits' own quota: 100,000 by default, 100 to 10,000,000", () => {
    expect(loadConfig({}).ratelimitAdHocCountersPerWorkspace).toBe(100_000);
    expect(loadConfig({ KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE: "5000" }).ratelimitAdHocCountersPerWorkspace).toBe(5000);
    for (const n of ["99", "10000001", "1.5"]) {
      expect(configError({ KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE: n }).message).toContain(
        "KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE:",
      );
    }
  });

  it("reads KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE (open by default), also as KEYHAVEN_RATELIMIT_FAIL, refusing the two at odds", () => {
    expect(loadConfig({}).ratelimitOnRedisFailure).toBe("open");
    expect(loadConfig({ KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: "closed" }).ratelimitOnRedisFailure).toBe("closed");
    expect(loadConfig({ KEYHAVEN_RATELIMIT_FAIL: "closed" }).ratelimitOnRedisFailure).toBe("closed");
    expect(loadConfig({ KEYHAVEN_RATELIMIT_FAIL: "closed", KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: "closed" }).ratelimitOnRedisFailure).toBe(
      "closed",
    );
    expect(configError({ KEYHAVEN_RATELIMIT_FAIL: "shut" }).message).toContain('KEYHAVEN_RATELIMIT_FAIL: must be "open" or "closed"');
    expect(configError({ KEYHAVEN_RATELIMIT_FAIL: "open", KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: "closed" }).message).toContain(
      "KEYHAVEN_RATELIMIT_FAIL, KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: both are set, to different values",
    );
  });

  it("reads KEYHAVEN_PGLITE_SHARED_BUFFERS_MB, the embedded store's buffer pool: 128 by default, 16 to 1024", () => {
    expect(loadConfig({}).pgliteSharedBuffersMb).toBe(128);
    expect(loadConfig({ KEYHAVEN_PGLITE_SHARED_BUFFERS_MB: "512" }).pgliteSharedBuffersMb).toBe(512);
    for (const mb of ["15", "1025", "64.5", "lots"]) {
      expect(configError({ KEYHAVEN_PGLITE_SHARED_BUFFERS_MB: mb }).message).toMatch(/KEYHAVEN_PGLITE_SHARED_BUFFERS_MB: must be/);
    }
  });

  it("reads KEYHAVEN_TRUST_PROXY as Fastify's trustProxy: off by default, on, or proxy addresses and ranges", () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ KEYHAVEN_TRUST_PROXY: "off" }).trustProxy).toBe(false);
    expect(loadConfig({ KEYHAVEN_TRUST_PROXY: "on" }).trustProxy).toBe(true);
    expect(loadConfig({ KEYHAVEN_TRUST_PROXY: "true" }).trustProxy).toBe(true);
    expect(loadConfig({ KEYHAVEN_TRUST_PROXY: "10.0.0.0/8, 192.168.1.5,fd00::/8 ,loopback" }).trustProxy).toEqual([
      "10.0.0.0/8",
      "192.168.1.5",
      "fd00::/8",
      "loopback",
    ]);
    // A hop count is refused: Fastify 5 trusts nobody for one, which would silently ignore every proxy.
    for (const value of ["yes", "2", "10.0.0.0/33", "::/129", "10.0.0.0/8/1", "proxy.internal", "10.0.0.1,", "10.0.0.0/255.0.0.0"]) {
      expect(configError({ KEYHAVEN_TRUST_PROXY: value }).message, value).toContain(
        'KEYHAVEN_TRUST_PROXY: must be "off", "on" or comma-separated proxy addresses and CIDR ranges (or loopback, linklocal, uniquelocal)',
      );
    }
  });

  it("treats a blank PORT as unset rather than as port 0", () => {
    expect(loadConfig({ PORT: " " }).port).toBe(8080);
  });

  it("ignores variables it does not know", () => {
    expect(loadConfig({ PATH: "/usr/bin", SOMETHING_ELSE: "x" })).toEqual(loadConfig({}));
  });

  it("returns a frozen config", () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(() => {
      (config as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(config.port).toBe(8080);
  });

  describe("KEYHAVEN_ENCRYPTION_KEY_FILE", () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-config-"));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const file = (name: string, content: string) => {
      const p = path.join(dir, name);
      writeFileSync(p, content, { mode: 0o600 });
      return p;
    };

    it("reads the key from the file, ignoring surrounding blanks (a trailing newline)", () => {
      const keyFile = file("ok.key", `  ${validKey}\n\n`);
      const config = loadConfig({ KEYHAVEN_ENCRYPTION_KEY_FILE: keyFile });
      expect(config.encryptionKey?.equals(Buffer.from(validKey, "base64"))).toBe(true);
      expect(config.encryptionKeyFile).toBe(keyFile);
    });

    it("refuses a file that is not a key by the variable's rule, naming the variable and the file, never the content", () => {
      const secretish = randomBytes(32).toString("hex");
      const keyFile = file("hex.key", `${secretish}\n`);
      const err = configError({ KEYHAVEN_ENCRYPTION_KEY_FILE: keyFile });
      expect(err.message).toContain(`KEYHAVEN_ENCRYPTION_KEY_FILE: ${keyFile}: must be 32 bytes encoded as base64`);
      expect(err.message).not.toContain(secretish);
    });

    it("refuses a missing file, naming it", () => {
      const missing = path.join(dir, "missing.key");
      expect(configError({ KEYHAVEN_ENCRYPTION_KEY_FILE: missing }).message).toContain(
        `KEYHAVEN_ENCRYPTION_KEY_FILE: ${missing}: cannot read it (ENOENT)`,
      );
    });

    it("refuses KEYHAVEN_ENCRYPTION_KEY and KEYHAVEN_ENCRYPTION_KEY_FILE together, naming both", () => {
      const keyFile = file("both.key", validKey);
      const err = configError({ KEYHAVEN_ENCRYPTION_KEY: validKey, KEYHAVEN_ENCRYPTION_KEY_FILE: keyFile });
      expect(err.message).toContain("KEYHAVEN_ENCRYPTION_KEY, KEYHAVEN_ENCRYPTION_KEY_FILE: both are set; set only one of them");
      expect(err.message).not.toContain(validKey);
    });
  });

  describe("KEYHAVEN_ROOT_KEY_FILE and DATABASE_PASSWORD_FILE (Docker secrets)", () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-config-secrets-"));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const file = (name: string, content: string) => {
      const p = path.join(dir, name);
      writeFileSync(p, content, { mode: 0o600 });
      return p;
    };

    it("reads the root key from its file, without the trailing newlines", () => {
      const rootKey = `root ${randomBytes(12).toString("base64")}`;
      expect(loadConfig({ KEYHAVEN_ROOT_KEY_FILE: file("root", `${rootKey}\n\n`) }).rootKey).toBe(rootKey);
    });

    it("refuses a short root key file, a missing one, and both variables, never showing the content", () => {
      const short = file("short", "tooshort\n");
      const err = configError({ KEYHAVEN_ROOT_KEY_FILE: short });
      expect(err.message).toContain(`KEYHAVEN_ROOT_KEY_FILE: ${short}: must hold at least 16 characters`);
      expect(err.message).not.toContain("tooshort");
      const missing = path.join(dir, "missing");
      expect(configError({ KEYHAVEN_ROOT_KEY_FILE: missing }).message).toContain(
        `KEYHAVEN_ROOT_KEY_FILE: ${missing}: cannot read it (ENOENT)`,
      );
      const both = configError({ KEYHAVEN_ROOT_KEY: "x".repeat(20), KEYHAVEN_ROOT_KEY_FILE: file("root2", "y".repeat(20)) });
      expect(both.message).toContain("KEYHAVEN_ROOT_KEY, KEYHAVEN_ROOT_KEY_FILE: both are set; set only one of them");
    });

    it("puts the password file's content into DATABASE_URL, percent-encoded, so any password works", () => {
      const password = "p@ss:w/rd%41 é#?";
      const config = loadConfig({
        DATABASE_URL: "postgres://keyhaven@postgres:5432/keyhaven",
        DATABASE_PASSWORD_FILE: file("pg", `${password}\n`),
      });
      const url = new URL(config.databaseUrl!);
      expect(decodeURIComponent(url.password)).toBe(password);
      expect([url.username, url.hostname, url.port, url.pathname]).toEqual(["keyhaven", "postgres", "5432", "/keyhaven"]);
    });

    it("refuses a password file without DATABASE_URL, beside a URL that holds a password, or empty", () => {
      const pg = file("pg2", "secret-password\n");
      expect(configError({ DATABASE_PASSWORD_FILE: pg }).message).toContain("DATABASE_PASSWORD_FILE: is set without DATABASE_URL");
      const twice = configError({ DATABASE_URL: "postgres://u:inline@h/db", DATABASE_PASSWORD_FILE: pg });
      expect(twice.message).toContain("DATABASE_URL, DATABASE_PASSWORD_FILE: the URL holds a password and the file another");
      expect(twice.message).not.toContain("secret-password");
      const empty = file("empty", "\n");
      expect(configError({ DATABASE_URL: "postgres://u@h/db", DATABASE_PASSWORD_FILE: empty }).message).toContain(
        `DATABASE_PASSWORD_FILE: ${empty}: is empty`,
      );
    });
  });

  describe("KEYHAVEN_UNKEY_FALLBACK_* (the Unkey fallback)", () => {
    const rootKey = `unkey_${randomBytes(12).toString("hex")}`;
    const url = "https://api.unkey.com/";
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-config-unkey-"));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("is off when KEYHAVEN_UNKEY_FALLBACK_URL is unset, with defaults for the tunables when set", () => {
      expect(loadConfig({}).unkeyFallback).toBeUndefined();
      expect(loadConfig({ KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey }).unkeyFallback).toEqual({
        url: "https://api.unkey.com",
        rootKey,
        until: undefined,
        timeoutMs: 1000,
        ratePerSecond: 20,
        negativeTtlMs: 600_000,
      });
    });

    it("reads the root key from its file, the end date and the tunables", () => {
      const keyFile = path.join(dir, "unkey");
      writeFileSync(keyFile, `${rootKey}\n`, { mode: 0o600 });
      const config = loadConfig({
        KEYHAVEN_UNKEY_FALLBACK_URL: "http://127.0.0.1:9999",
        KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE: keyFile,
        KEYHAVEN_UNKEY_FALLBACK_UNTIL: "2027-03-31",
        KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS: "250",
        KEYHAVEN_UNKEY_FALLBACK_RATE: "3",
        KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS: "5000",
      }).unkeyFallback;
      expect(config).toEqual({
        url: "http://127.0.0.1:9999",
        rootKey,
        until: Date.UTC(2027, 2, 31),
        timeoutMs: 250,
        ratePerSecond: 3,
        negativeTtlMs: 5000,
      });
      const withTime = loadConfig({
        KEYHAVEN_UNKEY_FALLBACK_URL: url,
        KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey,
        KEYHAVEN_UNKEY_FALLBACK_UNTIL: "2027-03-31T18:00:00+02:00",
      });
      expect(withTime.unkeyFallback!.until).toBe(Date.UTC(2027, 2, 31, 16));
    });

    it.each([
      [{ KEYHAVEN_UNKEY_FALLBACK_URL: url }, "KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: is required with KEYHAVEN_UNKEY_FALLBACK_URL"],
      [
        { KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey },
        "KEYHAVEN_UNKEY_FALLBACK_URL: is unset, but other KEYHAVEN_UNKEY_FALLBACK_ variables are set",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: `https://user:${rootKey}@api.unkey.com`, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey },
        "KEYHAVEN_UNKEY_FALLBACK_URL: must be an http:// or https:// URL without credentials",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: "ftp://unkey", KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey },
        "KEYHAVEN_UNKEY_FALLBACK_URL: must be an http:// or https:// URL",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE: "/nowhere" },
        "KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE: both are set; set only one of them",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: `${rootKey} x` },
        "KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: must be printable ASCII without spaces (the value is not shown)",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey, KEYHAVEN_UNKEY_FALLBACK_UNTIL: "next spring" },
        "KEYHAVEN_UNKEY_FALLBACK_UNTIL: must be an ISO 8601 date",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey, KEYHAVEN_UNKEY_FALLBACK_UNTIL: "2027-02-30" },
        "KEYHAVEN_UNKEY_FALLBACK_UNTIL: must be an ISO 8601 date",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey, KEYHAVEN_UNKEY_FALLBACK_RATE: "0" },
        "KEYHAVEN_UNKEY_FALLBACK_RATE: must be at least 1",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey, KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS: "10" },
        "KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS: must be at least 1000",
      ],
      [
        { KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: rootKey, KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS: "5000" },
        "KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS: must be less than DATABASE_STATEMENT_TIMEOUT_MS (5000), which bounds a verification",
      ],
    ])("refuses %j, naming the variable and never the root key", (env, message) => {
      const err = configError(env);
      expect(err.message).toContain(message);
      expect(err.message).not.toContain(rootKey);
    });

    it("names the root key file it cannot read, not its content", () => {
      const missing = path.join(dir, "missing");
      const err = configError({ KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE: missing });
      expect(err.message).toContain(`KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE: ${missing}: cannot read it (ENOENT)`);
    });
  });
});
