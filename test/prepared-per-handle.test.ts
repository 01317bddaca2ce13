/**
 * preparedPerHandle (storage/client.ts): drizzle builds a statement once per database handle, not on every call
 * (issue 13 §3); each handle (the store's, a transaction's) gets its own, since a statement runs on the handle it
 * was prepared on.
 */
import { describe, expect, it } from "vitest";
import { type Db, preparedPerHandle } from "../src/storage/client.js";

describe("preparedPerHandle", () => {
  it("builds once per handle, and a statement of its own for each handle", () => {
    const built: object[] = [];
    const statementOf = preparedPerHandle((db) => {
      built.push(db);
      return { db };
    });
    const first = {} as Db;
    const second = {} as Db;
    const a = statementOf(first);
    expect(statementOf(first)).toBe(a);
    expect(statementOf(first)).toBe(a);
    const b = statementOf(second);
    expect(b).not.toBe(a);
    expect(b.db).toBe(second);
    expect(built).toEqual([first, second]);
  });
});
