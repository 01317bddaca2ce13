import { describe, expect, test } from "vitest";
import { type Caller, trustedCaller } from "../src/core/caller.js";
import { WriteGate } from "../src/core/changes.js";
import { systemClock } from "../src/clock.js";
import type { Db } from "../src/storage/client.js";

const caller = trustedCaller({ kind: "cli", id: "test", name: "test" }, "ws_test", { surface: "cli" });

describe("WriteGate.afterCommit", () => {
  test("outside an idempotency scope it runs at once: each gate call has committed when it returns", () => {
    const gate = new WriteGate(undefined as unknown as Db, systemClock);
    let ran = 0;
    gate.afterCommit(caller, () => ran++);
    expect(ran).toBe(1);
  });

  test("in an idempotency scope it is handed to the scope, which runs it only after its transaction commits", () => {
    const gate = new WriteGate(undefined as unknown as Db, systemClock);
    const pending: Array<() => void> = [];
    const scoped: Caller = Object.assign({}, caller, {
      idempotency: { key: "k", within: () => Promise.reject(new Error("unused")), afterCommit: (fn: () => void) => pending.push(fn) },
    });
    let ran = 0;
    gate.afterCommit(scoped, () => ran++);
    expect(ran).toBe(0);
    for (const fn of pending) fn();
    expect(ran).toBe(1);
  });
});
