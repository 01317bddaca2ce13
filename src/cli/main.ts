import { parseArgs } from "node:util";

// Each command imports what it needs when it runs: `keyhaven help`, `keyhaven import …`, `keyhaven admin …` and
// `keyhaven audit …` load neither the server (Fastify) nor the store (PGlite, postgres.js, drizzle); test/cli.test.ts
// checks it.

const HELP = `keyhaven: self-hosted API key management speaking the Unkey v1 API

Usage: keyhaven <command> [options]

Commands:
  serve      Start the HTTP server (applies migrations first). What \`npm start\` runs.
  migrate    Apply the database migrations and bootstrap the default workspace, then exit.
  import     Import existing keys from a JSON-lines or CSV file into an API, resumably:
               keyhaven import FILE --api <apiId> [--root-key <key>] [--url <url>] [--dry-run]
               [--continue-on-error] [--journal <path>] [--format jsonl|csv] [--batch-size <n>]
               [--concurrency <n>] [--attempts <n>] [--timeout <s>] [--progress-every <n>] [--quiet]
             Or copy a hosted Unkey workspace (resumable; --dry-run shows what, --check compares both sides):
               keyhaven import --from-unkey --api <apiId>... [--ratelimit-namespace <name>...] [--dry-run | --check]
  admin      Operator commands against a running server ([--admin-token <t>] [--url <url>] [--json]):
               workspace create --name <name> | workspace list | workspace disable <id> | workspace enable <id>
               root-key create --workspace <id> --permission <p>... [--name <n>] | root-key list --workspace <id>
               root-key delete <keyId> | migration retry --workspace <id> <migrationId>
  audit      Export the audit log of a running server as NDJSON on stdout, oldest first (for a SIEM):
               keyhaven audit export --since <time> [--until <time>] [--workspace <id>]
               [--admin-token <t> | --root-key <key>] [--url <url>] [--timeout <s>] [--attempts <n>] [--quiet]
  rotate-encryption-key --new-key-file <path>
             Re-wrap the stored data keys under a new KEYHAVEN_ENCRYPTION_KEY (docs/operations.md, "Running in production").
  reset-encryption-key --delete-stored-plaintexts
             The encryption key is lost: delete the stored plaintexts and data keys sealed under it, so keyhaven
             starts with a new key. Verification keeps working. See its --help first.
  help       Show this help.

\`keyhaven import --help\`, \`keyhaven admin --help\` and \`keyhaven audit --help\` describe every option and exit code.
Configuration is read from the environment; see docs/operations.md ("Configuration").
`;

async function serve(): Promise<void> {
  const [{ loadConfig }, { startServer }] = await Promise.all([import("../config.js"), import("../main.js")]);
  const server = await startServer(loadConfig());
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) process.exit(1);
    server.app.log.info({ signal }, "shutting down: finishing in-flight requests");
    server.close().then(
      () => process.exit(0),
      (err) => {
        console.error("shutdown failed:", err);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

/**
 * A one-shot command stopped by SIGINT or SIGTERM leaves through process.exit, whose exit handlers release the
 * embedded store's data directory lock (the default action of a signal runs none).
 */
function exitOnStopSignals(): void {
  process.once("SIGINT", () => process.exit(130));
  process.once("SIGTERM", () => process.exit(143));
}

async function migrate(): Promise<void> {
  exitOnStopSignals();
  const [{ loadConfig }, { bootstrap }, { migrateAndRun }, { generatedRootKeyNotice, openStore }] = await Promise.all([
    import("../config.js"),
    import("../bootstrap.js"),
    import("../storage/client.js"),
    import("../main.js"),
  ]);
  const config = loadConfig();
  const store = await openStore(config);
  try {
    const boot = await migrateAndRun(store, config.databaseUrl, () => bootstrap(store.db, config));
    console.log(`migrations applied to ${store.description}`);
    // The store was created here: its root key is shown here, once, since `serve` will not generate another.
    if (boot.generatedRootKey) {
      console.log(generatedRootKeyNotice(boot.generatedRootKey, config.publicUrl ?? `http://${config.host}:${config.port}`).join("\n"));
    }
  } finally {
    await store.close();
  }
}

/**
 * The commands that open a store write its files (PGlite's data directory, the generated key file, the lock) and
 * nothing meant for other users: each file they create is this user's alone (umask 077), whatever umask they were
 * started with (022 made PGlite's files 0644). The data directory is also made private at each open (dataDir.ts).
 */
const STORE_COMMANDS = new Set(["serve", "migrate", "rotate-encryption-key", "reset-encryption-key"]);

export async function run(argv: string[]): Promise<void> {
  if (STORE_COMMANDS.has(argv[0] ?? "")) process.umask(0o077);
  // The client commands parse their own options.
  if (argv[0] === "import") {
    const { importCommand } = await import("./import/import.command.js");
    process.exitCode = await importCommand(argv.slice(1));
    return;
  }
  if (argv[0] === "admin") {
    const { adminCommand } = await import("./admin.command.js");
    process.exitCode = await adminCommand(argv.slice(1));
    return;
  }
  if (argv[0] === "audit") {
    const { auditCommand } = await import("./audit.command.js");
    process.exitCode = await auditCommand(argv.slice(1));
    return;
  }
  if (argv[0] === "reset-encryption-key") {
    const { resetEncryptionKeyCommand } = await import("./resetEncryptionKey.command.js");
    process.exitCode = await resetEncryptionKeyCommand(argv.slice(1));
    return;
  }
  if (argv[0] === "rotate-encryption-key") {
    exitOnStopSignals();
    const { rotateEncryptionKeyCommand } = await import("./rotateEncryptionKey.command.js");
    process.exitCode = await rotateEncryptionKeyCommand(argv.slice(1));
    return;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { help: { type: "boolean", short: "h" } } });
  } catch (err) {
    console.error(`keyhaven: ${(err as Error).message}\n\n${HELP}`);
    process.exitCode = 2;
    return;
  }
  const { positionals, values } = parsed;
  const command = positionals[0] ?? "help";
  if (values.help || command === "help") {
    console.log(HELP);
    return;
  }
  if (command === "serve") return serve();
  if (command === "migrate") return migrate();
  console.error(`unknown command: ${command}\n\n${HELP}`);
  process.exitCode = 2;
}

run(process.argv.slice(2)).catch(async (err) => {
  // A failed start is reported in one line (the stack only with LOG_LEVEL=debug or trace). config.js is loaded
  // already whenever a ConfigError can have been thrown.
  const { ConfigError } = await import("../config.js");
  const verbose = process.env.LOG_LEVEL === "debug" || process.env.LOG_LEVEL === "trace";
  console.error(err instanceof ConfigError || !verbose ? `keyhaven: ${(err as Error).message}` : err);
  process.exit(1);
});
