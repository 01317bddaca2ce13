/**
 * Processes queued items a batch at a time: items added while a batch is in process wait, and all of them go into
 * the next batch. Under load one database statement then serves many requests, and every item is processed by a
 * run that started after it was added (what the epoch checks rely on). `fail` answers a batch whose run threw.
 */
export class Coalescer<T> {
  private waiting: T[] = [];
  private running = false;

  constructor(
    private readonly process: (batch: T[]) => Promise<void>,
    private readonly fail: (batch: T[], err: unknown) => void,
  ) {}

  add(item: T): void {
    this.waiting.push(item);
    if (!this.running) void this.run();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting;
        this.waiting = [];
        try {
          await this.process(batch);
        } catch (err) {
          this.fail(batch, err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}
