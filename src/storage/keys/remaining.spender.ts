import type { Db } from "../client.js";
import { spendRemaining } from "./keys.repository.js";

type Spend = { cost: number; resolve: (left: number | undefined) => void; reject: (err: unknown) => void };

/**
 * Spends the remaining uses of verifications, one database statement per key at a time. Verifications of a key
 * whose statement is running wait for it and are then spent together, in arrival order, by the next statement
 * (one per distinct cost). A key verified by many clients at once therefore costs one row lock and one commit per
 * group instead of one per verification, while every spend is still atomic in the database: no overdraw across
 * any number of processes, and no use granted that the database did not record. One per process (services.ts).
 */
export class RemainingSpender {
  private waiting = new Map<string, Spend[]>();
  private running = new Set<string>();

  constructor(private readonly db: Db) {}

  /** The uses left after this verification's spend, or undefined when it was refused (not enough left). */
  spend(keyId: string, cost: number): Promise<number | undefined> {
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(keyId);
      if (queue) queue.push({ cost, resolve, reject });
      else this.waiting.set(keyId, [{ cost, resolve, reject }]);
      if (!this.running.has(keyId)) void this.run(keyId);
    });
  }

  private async run(keyId: string): Promise<void> {
    this.running.add(keyId);
    try {
      for (let batch = this.take(keyId); batch; batch = this.take(keyId)) {
        for (const [cost, group] of groupByCost(batch)) {
          try {
            const result = await spendRemaining(this.db, keyId, cost, group.length);
            for (const [i, s] of group.entries()) {
              s.resolve(result && i < result.granted ? result.before - cost * (i + 1) : undefined);
            }
          } catch (err) {
            for (const s of group) s.reject(err);
          }
        }
      }
    } finally {
      this.running.delete(keyId);
    }
  }

  private take(keyId: string): Spend[] | undefined {
    const batch = this.waiting.get(keyId);
    this.waiting.delete(keyId);
    return batch;
  }
}

function groupByCost(batch: Spend[]): Map<number, Spend[]> {
  const groups = new Map<number, Spend[]>();
  for (const s of batch) {
    const group = groups.get(s.cost);
    if (group) group.push(s);
    else groups.set(s.cost, [s]);
  }
  return groups;
}
