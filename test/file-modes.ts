import { lstatSync, readdirSync } from "node:fs";
import path from "node:path";

/** Every directory and file under `dir` (itself included, as ".") with its permission bits; symbolic links left out. */
export function modesUnder(dir: string): Map<string, number> {
  const modes = new Map<string, number>();
  const visit = (file: string) => {
    const stat = lstatSync(file);
    if (stat.isSymbolicLink()) return;
    modes.set(path.relative(dir, file) || ".", stat.mode & 0o777);
    if (stat.isDirectory()) for (const entry of readdirSync(file)) visit(path.join(file, entry));
  };
  visit(dir);
  return modes;
}

/** What under `dir` is not this user's alone: a directory other than 0700, a file other than 0600. */
export function notPrivateUnder(dir: string): string[] {
  return [...modesUnder(dir)]
    .filter(([file, mode]) => mode !== (lstatSync(path.join(dir, file)).isDirectory() ? 0o700 : 0o600))
    .map(([file, mode]) => `${file} 0${mode.toString(8)}`);
}
