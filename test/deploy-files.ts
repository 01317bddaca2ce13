import { readFileSync } from "node:fs";

/** The deployment files as shipped, read by the tests that check or run them. */

export const readProjectFile = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), "utf8");

/** Splits a shell command line into words, keeping quoted strings and `$( … )` together. No expansion. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let depth = 0;
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word += c;
    } else if (c === "$" && line[i + 1] === "(") {
      depth++;
      word += c;
    } else if (c === ")" && depth > 0) {
      depth--;
      word += c;
    } else if (/\s/.test(c) && depth === 0) {
      if (word) words.push(word);
      word = "";
    } else {
      word += c;
    }
  }
  if (word) words.push(word);
  return words;
}

/**
 * The command that docs/operations.md's "Running in production" starts: the last command of the first sh block of that section
 * (comments dropped, continuation lines joined), without its leading `NAME=value` assignments. What a supervisor
 * would exec.
 */
export function productionCommand(): string[] {
  const operations = readProjectFile("docs/operations.md");
  const start = operations.indexOf("## Running in production");
  if (start < 0) throw new Error('docs/operations.md: no "## Running in production" section');
  const block = operations.slice(start).match(/```sh\n([\s\S]*?)```/)?.[1];
  if (!block) throw new Error('docs/operations.md: no sh block under "## Running in production"');
  const commands = block
    .replace(/\\\n/g, " ")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.trimStart().startsWith("#"));
  const words = shellWords(commands.at(-1) ?? "");
  const first = words.findIndex((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w));
  return words.slice(first);
}

/** The argv of the Dockerfile's final CMD, which must be in exec form (a JSON array). */
export function dockerCmd(): string[] {
  const cmd = [...readProjectFile("Dockerfile").matchAll(/^CMD\s+(.*)$/gm)].at(-1)?.[1];
  if (!cmd?.startsWith("[")) throw new Error(`Dockerfile: CMD is not in exec form: ${cmd}`);
  return JSON.parse(cmd) as string[];
}
