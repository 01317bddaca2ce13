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
  ["src/http", [/^src\/wire\//, /^src\/core\//, /^src\/cli\//, /^src\/(app|main|services)\.ts$/]],
];

describe("the import graph of src/", () => {
  test.each(rules)("%s imports nothing above it", (folder, never) => {
    const found = importsOf(folder);
    expect(found.length).toBeGreaterThan(0);
    const offending = found.filter(({ target }) => never.some((re) => re.test(target))).map(({ file, target }) => `${file} -> ${target}`);
    expect(offending).toEqual([]);
  });

  test("only the v1 adapter imports a v1 route file (v1.<service>.<method>.ts)", () => {
    const offending = importsOf("src")
      .filter(({ file, target }) => /(^|\/)v1\.[^/]*$/.test(target) && !file.startsWith("src/wire/v1/"))
      .map(({ file, target }) => `${file} -> ${target}`);
    expect(offending).toEqual([]);
  });
});
