import { describe, expect, it } from "vitest";
import { Coalescer } from "../src/storage/coalescer.js";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A coalescer whose batches each wait until the test ends them, recording what each batch held. */
function controlled(options?: ConstructorParameters<typeof Coalescer<number>>[2]) {
  const batches: number[][] = [];
  const ends: (() => void)[] = [];
  const failed: number[][] = [];
  const queue = new Coalescer<number>(
    (batch) => {
      batches.push(batch);
      return new Promise<void>((resolve) => ends.push(resolve));
    },
    (batch) => failed.push(batch),
    options,
  );
  return { queue, batches, ends, failed };
}

describe("Coalescer", () => {
  it("processes one batch at a time by default: items added meanwhile form the next batch", async () => {
    const { queue, batches, ends } = controlled();
    queue.add(1);
    queue.add(2);
    await nextTurn();
    queue.add(3);
    queue.add(4);
    await nextTurn();
    expect(batches).toEqual([[1, 2]]);
    ends[0]!();
    await nextTurn();
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    ends[1]!();
  });

  it("starts a batch beside those in process, up to inFlight, only for an item that startsBeside allows", async () => {
    const { queue, batches, ends } = controlled({ inFlight: 2, startsBeside: (n) => n < 0 });
    queue.add(1);
    await nextTurn();
    queue.add(2);
    await nextTurn();
    expect(batches).toEqual([[1]]); // 2 waits: nothing in it may start beside
    queue.add(-3);
    await nextTurn();
    expect(batches).toEqual([[1], [2, -3]]);
    queue.add(-4);
    await nextTurn();
    expect(batches).toEqual([[1], [2, -3]]); // two in process already
    ends[1]!();
    await nextTurn();
    expect(batches).toEqual([[1], [2, -3], [-4]]);
    queue.add(5);
    ends[2]!();
    await nextTurn();
    expect(batches).toEqual([[1], [2, -3], [-4]]); // 5 waits for the one still in process
    ends[0]!();
    await nextTurn();
    expect(batches).toEqual([[1], [2, -3], [-4], [5]]);
    ends[3]!();
  });

  it("answers a batch whose processing threw through fail, and goes on with the next", async () => {
    const failed: number[][] = [];
    const done: number[][] = [];
    const queue = new Coalescer<number>(
      async (batch) => {
        if (batch.includes(0)) throw new Error("refused");
        done.push(batch);
      },
      (batch) => failed.push(batch),
    );
    queue.add(0);
    await nextTurn();
    queue.add(1);
    for (let i = 0; i < 3; i++) await nextTurn();
    expect([failed, done]).toEqual([[[0]], [[1]]]);
  });
});
