import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, test } from "vitest";

// The storeys of src/ (docs: CONTRIBUTING.md, "Layout"): imports only run down. Each rule names what a folder must
// never import; a test per folder, so a broken rule names the files that broke it.

type Import = { file: string; target: string };

function importsOf(folder: string): Import[] {
  const files = (readdirSync(folder, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
  return files.flatMap((f) => {
    const file = join(folder, f);
    const text = readFileSync(file, "utf8");
    return [...text.matchAll(/from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g)].map((m) => {
      const spec = (m[1] ?? m[2])!;
      const target = spec.startsWith(".") ? normalize(join(dirname(file), spec)).replace(/\.js$/, ".ts") : spec;
      return { file, target };
    });
  });
}

const ABOVE_CORE = [/^src\/wire\//, /^src\/http\//, /^src\/cli\//, /^src\/(app|main|services|background|bootstrap)\.ts$/, /^fastify/];
const rules: [folder: string, never: RegExp[]][] = [
  ["src/core", ABOVE_CORE],
  ["src/keyring", [...ABOVE_CORE, /^src\/core\//]],
  ["src/storage", [...ABOVE_CORE, /^src\/core\//, /^src\/keyring\//]],
  ["src/crypto", [...ABOVE_CORE, /^src\/core\//, /^src\/keyring\//, /^src\/storage\//]],
  // Unkey's wire contract (schemas, the fallback's client): read by the core and the CLI, it reads neither.
  ["src/unkey", [...ABOVE_CORE, /^src\/core\//, /^src\/keyring\//, /^src\/storage\//]],
  ["src/http", [/^src\/wire\//, /^src\/core\//, /^src\/cli\//, /^src\/(app|main|services)\.ts$/]],
];

describe("the import graph of src/", () => {
  test.each(rules)("%s imports nothing above it", (folder, never) => {
    const found = importsOf(folder);
    expect(found.length).toBeGreaterThan(0);
    const offending = found.filter(({ target }) => never.some((re) => re.test(target))).map(({ file, target }) => `${file} -> ${target}`);
    expect(offending).toEqual([]);
  });

  // An adapter parses, calls the core and shapes its answer: the rules (permission checks, not-found, existence)
  // live in the core, so a handler reaching a repository would bypass them. Types and constants of storage may be
  // named; a repository's functions may not.
  test("no file under src/wire/ imports a value from a repository (*.repository.ts)", () => {
    const files = (readdirSync("src/wire", { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
    expect(files.length).toBeGreaterThan(0);
    const offending = files.flatMap((f) => {
      const file = join("src/wire", f);
      const text = readFileSync(file, "utf8");
      return [...text.matchAll(/(import|export)\s+(type\s+)?([^;]*?)\s*from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g)]
        .filter((m) => /\.repository(\.js)?$/.test((m[4] ?? m[5])!))
        .filter((m) => {
          if (m[5] !== undefined) return true; // import("…"): a value at run time
          if (m[2] !== undefined) return false; // import type { … } / export type { … }
          // `import { type A, type B }` imports nothing at run time either
          const names = /\{([^}]*)\}/.exec(m[3]!)?.[1];
          if (
            names === undefined ||
            m[3]!
              .replace(/\{[^}]*\}/, "")
              .trim()
              .replace(/,$/, "") !== ""
          )
            return true;
          return names
            .split(",")
            .map((n) => n.trim())
            .filter((n) => n !== "")
            .some((n) => !n.startsWith("type "));
        })
        .map((m) => `${file} -> ${m[4] ?? m[5]}`);
    });
    expect(offending).toEqual([]);
  });

  test("only the v1 adapter imports a v1 route file (v1.<service>.<method>.ts)", () => {
    const offending = importsOf("src")
      .filter(({ file, target }) => /(^|\/)v1\.[^/]*$/.test(target) && !file.startsWith("src/wire/v1/"))
      .map(({ file, target }) => `${file} -> ${target}`);
    expect(offending).toEqual([]);
  });

  // Issue 35: the write gate (src/core/changes.ts) owns every transaction, so every change is recorded with it;
  // a repository takes the gate's `tx` and never opens one. A savepoint inside the gate's transaction (a retry that
  // undoes one attempt) is the one other use, named here.
  test("only the write gate opens a transaction; savepoints are named", () => {
    const SAVEPOINTS = new Set(["src/core/import/import.batch.ts"]);
    // The other owner: an Idempotency-Key's request scope, whose one held transaction the gate runs every change of
    // the request in (core/changes.ts, WriteGate.transaction), each in a savepoint.
    const GATE = new Set([join("src", "core", "changes.ts"), join("src", "core", "idempotency", "idempotency.ts")]);
    // The one read-only transaction: v2's SQL analytics, which needs one for its SET LOCAL statement_timeout and time
    // zone, and writes nothing (so records nothing).
    const READ_ONLY = new Set([join("src", "storage", "analytics", "analytics.sql.repository.ts")]);
    const files = (readdirSync("src", { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).map((f) => join("src", f));
    const offending = files.filter(
      (file) => !GATE.has(file) && !SAVEPOINTS.has(file) && !READ_ONLY.has(file) && /\.transaction\(/.test(readFileSync(file, "utf8")),
    );
    expect(offending).toEqual([]);
    for (const file of SAVEPOINTS) expect(readFileSync(file, "utf8"), file).toMatch(/tx\.transaction\(/);
    for (const file of READ_ONLY) expect(readFileSync(file, "utf8"), file).toContain('tx.execute(sql.raw("set transaction read only"))');
  });
});

// Issue 35 §1: the core receives a Caller and the surface's rules, never a protocol name. The one place a surface's
// name stands in the core is the Caller's `origin.surface`, which the audit log records and nothing branches on.
describe("no protocol names in the core", () => {
  const SURFACE_TYPE = 'export type Surface = "v1" | "v2" | "operator" | "cli" | "worker" | "console" | "portal";';
  test('src/core names no protocol ("v1"/"v2" literals or a *Dialect type), but for the Surface an entry records', () => {
    const files = (readdirSync("src/core", { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
    expect(files.length).toBeGreaterThan(0);
    const offending = files.flatMap((f) => {
      const file = join("src/core", f);
      return readFileSync(file, "utf8")
        .split("\n")
        .flatMap((line, i) =>
          /["'`]v[12]["'`]|\w*Dialect\b/.test(line) && line.trim() !== SURFACE_TYPE ? [`${file}:${i + 1}: ${line.trim()}`] : [],
        );
    });
    expect(offending).toEqual([]);
    expect(readFileSync("src/core/caller.ts", "utf8")).toContain(SURFACE_TYPE);
  });
});

// v2 words its own errors, sets its own body limits and takes a request's origin from src/http (issue 35 §1): no
// file of the v2 surface imports one of v1's.
test("no file under src/wire/v2/ imports a file of src/wire/v1/", () => {
  const offending = importsOf("src/wire/v2")
    .filter(({ target }) => target.startsWith("src/wire/v1/"))
    .map(({ file, target }) => `${file} -> ${target}`);
  expect(offending).toEqual([]);
});
