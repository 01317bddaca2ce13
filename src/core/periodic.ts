/**
 * Runs a background task at start and then every `intervalMs`, never two runs at once (a tick while one is still going
 * is skipped), its timer never keeping the process alive; stop() waits for the run in progress. The task handles its
 * own failures (it must not reject): the pruners and scans log theirs and try again at the next interval.
 */
export class PeriodicRun {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly intervalMs: number) {}

  get started(): boolean {
    return this.timer !== undefined;
  }

  start(task: () => Promise<void>): void {
    if (this.timer) return;
    const run = () => {
      if (this.running) return;
      this.running = task().finally(() => {
        this.running = undefined;
      });
    };
    this.timer = setInterval(run, this.intervalMs);
    this.timer.unref();
    run();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
