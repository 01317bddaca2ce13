import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
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
  });

  it("reads every variable it knows", () => {
    const config = loadConfig({
      PORT: "3000",
      HOST: "0.0.0.0",
      DATABASE_URL: "postgresql://user:pw@db:5432/keys",
      DATABASE_POOL_SIZE: "10",
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
    ["KEYHAVEN_PUBLIC_URL", "has a path", "https://keys.example.com/api"],
    ["KEYHAVEN_PUBLIC_URL", "has a query", "https://keys.example.com?x=1"],
    ["KEYHAVEN_PUBLIC_URL", "has no scheme", "keys.example.com"],
  ])("refuses %s when its value %s, with a ConfigError naming the variable", (name, _why, value) => {
    const err = configError({ [name]: value });
    expect(err.message).toContain(`${name}:`);
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
});
