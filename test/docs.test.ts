import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { AUDIT_EVENTS } from "../src/core/audit/audit.events.js";
import { readProjectFile } from "./deploy-files.js";

/** The Markdown files a reader follows links through: the README, the project files and docs/. */
const markdownFiles = [
  "README.md",
  "CONTRIBUTING.md",
  "CHANGELOG.md",
  ...readdirSync(new URL("../docs/", import.meta.url))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The lines of a Markdown file outside fenced code blocks. */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split("\n").filter((line) => {
    if (line.startsWith("```")) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = line.match(/^#{1,6} (.+)$/)?.[1];
    if (!heading) continue;
    const slug = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Every relative link `[text](target)` of a file's prose, with the file it points to and its anchor. */
function relativeLinks(file: string): { target: string; path: string; anchor?: string }[] {
  const links: { target: string; path: string; anchor?: string }[] = [];
  for (const line of proseLines(readProjectFile(file))) {
    for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target!) || target!.startsWith("/")) continue; // URLs, and server paths like /docs
      const [pathPart, anchor] = target!.split("#") as [string, string | undefined];
      const path = pathPart === "" ? file : normalize(join(dirname(file), pathPart));
      links.push({ target: target!, path, ...(anchor !== undefined && { anchor }) });
    }
  }
  return links;
}

describe("the documentation", () => {
  it("links only to files and headings that exist", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of markdownFiles) {
      for (const link of relativeLinks(file)) {
        checked++;
        const url = new URL(`../${link.path}`, import.meta.url);
        if (!existsSync(url)) broken.push(`${file}: ${link.target} (no file ${link.path})`);
        else if (link.anchor !== undefined) {
          if (statSync(url).isDirectory() || !anchorsOf(readProjectFile(link.path)).has(link.anchor)) {
            broken.push(`${file}: ${link.target} (no heading #${link.anchor} in ${link.path})`);
          }
        }
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(30);
  });

  it("keeps the README to what a newcomer needs, under 250 lines, with every doc linked from it or the index", () => {
    const readme = readProjectFile("README.md");
    expect(readme.split("\n").length).toBeLessThan(250);
    expect(readme).toContain("npm ci && npm start");
    expect(readme).toContain("npm ci && npm test");
    for (const concept of ["workspace", "API", "root key", "key", "identity"]) expect(readme).toContain(`**${concept}**`);
    expect(readme).toMatch(/new Unkey\(\{[^}]*baseUrl/);
    expect(readme).toMatch(/standalone `verifyKey\(\)` helper[\s\S]{0,200}always calls the retired hosted API/);
    const linked = new Set([...relativeLinks("README.md"), ...relativeLinks("docs/README.md")].map((l) => l.path));
    for (const file of markdownFiles.filter((f) => f.startsWith("docs/") && f !== "docs/README.md")) {
      expect(linked, file).toContain(file);
    }
  });

  it("keeps the differences from v1 as one table, so that a change of behaviour edits its row", () => {
    const lines = proseLines(readProjectFile("docs/differences-from-v1.md"));
    const separators = lines.filter((l) => /^\|(\s*-+\s*\|)+$/.test(l));
    expect(separators).toHaveLength(1);
    const first = lines.findIndex((l) => l.startsWith("|"));
    const last = lines.findLastIndex((l) => l.startsWith("|"));
    expect(lines.slice(first, last + 1).every((l) => l.startsWith("|"))).toBe(true);
    expect(last - first).toBeGreaterThan(50);
  });

  it("names every event of the audit catalogue in docs/audit.md, so that a new event cannot go undocumented", () => {
    const named = new Set([...readProjectFile("docs/audit.md").matchAll(/`([A-Za-z]+\.[a-z_]+)`/g)].map((m) => m[1]));
    expect(AUDIT_EVENTS.filter((event) => !named.has(event))).toEqual([]);
  });

  it("ships the licence package.json names", () => {
    const pkg = JSON.parse(readProjectFile("package.json")) as { license: string };
    expect(pkg.license).toBe("MIT");
    const license = readProjectFile("LICENSE");
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 keyhaven contributors\n/);
    expect(license).toContain('THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND');
  });
});
