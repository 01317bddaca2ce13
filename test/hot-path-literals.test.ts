import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// On Node 20 (V8 11.3), once a function is optimized, every object made by a literal that starts with a spread and
// adds properties after it (`{ ...a, x }`) gets a hidden class of its own: a new map per call for the collector,
// and megamorphic property reads wherever the object goes next. Every request built its handler context that way,
// and every verification its answer: written out or with Object.assign, keyhaven's CPU per verification fell by a
// quarter (docs/benchmarks.md, "Object spreads on the hot path"). The code that runs per request keeps none.

const ROOT = path.resolve(import.meta.dirname, "..");

/** What runs per request on the verification, rate-limit and key-write paths (directories: every .ts file in them). */
const HOT_PATH = [
  "src/core/verification",
  "src/core/ratelimits",
  "src/storage/keys",
  "src/storage/ratelimits",
  "src/storage/coalescer.ts",
  "src/storage/invalidations.ts",
  "src/storage/epoch.ts",
  "src/storage/analytics",
  "src/storage/verificationLog",
  "src/core/auth",
  "src/wire/v1/rpc.ts",
  "src/wire/v2/rpc.ts",
  "src/wire/v1/keys/v1.keys.verifyKey.ts",
  "src/wire/v2/keys/v2.keys.verifyKey.ts",
  "src/wire/v1/ratelimits",
  "src/wire/v2/ratelimit",
  "src/http",
];

function filesOf(entry: string): string[] {
  const full = path.join(ROOT, entry);
  if (!statSync(full).isDirectory()) return [entry];
  return readdirSync(full)
    .filter((name) => name.endsWith(".ts"))
    .map((name) => path.join(entry, name));
}

/**
 * `file:line: text` of each object literal in a function of `file` whose first member is a spread and that has more
 * members (the module's own top level runs once: schemas built there are not per request).
 */
function spreadThenMore(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const inFunction = (node: ts.Node): boolean => {
    for (let up = node.parent; up !== undefined; up = up.parent) if (ts.isFunctionLike(up)) return true;
    return false;
  };
  const visit = (node: ts.Node) => {
    if (
      ts.isObjectLiteralExpression(node) &&
      node.properties.length > 1 &&
      ts.isSpreadAssignment(node.properties[0]!) &&
      inFunction(node)
    ) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart());
      found.push(`${file}:${line + 1}: ${node.getText().replace(/\s+/g, " ").slice(0, 80)}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("the code that runs per request", () => {
  it("finds the pattern it looks for", () => {
    const text = "const s = { ...base, x: 1 };\nfunction f() { return [{ ...found, valid: true }, { ...c }, { e, ...g }]; }";
    expect(spreadThenMore("x.ts", text)).toEqual(["x.ts:2: { ...found, valid: true }"]);
  });

  it("builds no object literal that starts with a spread and adds members after it", () => {
    const files = HOT_PATH.flatMap(filesOf);
    expect(files.length).toBeGreaterThan(30);
    const found = files.flatMap((file) => spreadThenMore(file, readFileSync(path.join(ROOT, file), "utf8")));
    expect(found).toEqual([]);
  });
});
