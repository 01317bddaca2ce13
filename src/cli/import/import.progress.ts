/**
 * Progress on stderr. On a terminal: one line redrawn in place (bar, done/total, keys/s, ETA). Otherwise (a log,
 * a pipe, CI): a plain line every `every` batches, and notes (retries, refusals) on lines of their own.
 */
export class Progress {
  private done = 0;
  private sentThisRun = 0;
  private batches = 0;
  private startedAt = 0;
  private lastDraw = 0;
  private drawn = false;

  constructor(
    /** Undefined when not known ahead (a copy from hosted Unkey, which counts nothing): no bar, no ETA. */
    private readonly total: number | undefined,
    private readonly out: NodeJS.WriteStream,
    private readonly options: { tty: boolean; every: number; enabled: boolean; unit?: string },
  ) {}

  start(alreadyDone: number): void {
    this.done = alreadyDone;
    this.startedAt = Date.now();
    if (!this.options.enabled) return;
    if (alreadyDone > 0 && this.total !== undefined) {
      this.line(`resuming: ${fmt(alreadyDone)} of ${fmt(this.total)} keys were imported by an earlier run`);
    }
    this.draw(true);
  }

  /** A batch finished (imported, found present, or refused); `imported` of its keys were created now. */
  advance(keys: number, imported: number): void {
    this.done += keys;
    this.sentThisRun += imported;
    this.batches += 1;
    if (!this.options.enabled) return;
    if (this.options.tty) this.draw(false);
    else if (this.batches % this.options.every === 0) this.line(this.status());
  }

  note(message: string): void {
    if (this.options.enabled) this.line(message);
  }

  finish(): void {
    if (!this.options.enabled) return;
    if (this.options.tty) {
      this.draw(true);
      this.out.write("\n");
      this.drawn = false;
    } else if (this.batches % this.options.every !== 0) this.line(this.status());
  }

  private status(): string {
    const elapsed = (Date.now() - this.startedAt) / 1000;
    const rate = elapsed > 0 ? this.sentThisRun / elapsed : 0;
    const unit = this.options.unit ?? "keys";
    if (this.total === undefined) return `${fmt(this.done)} ${unit}, ${fmt(Math.round(rate))} ${unit}/s`;
    const left = this.total - this.done;
    const eta = rate > 0 ? `ETA ${duration(left / rate)}` : "ETA –";
    const pct = this.total === 0 ? 100 : Math.floor((this.done / this.total) * 100);
    return `${fmt(this.done)}/${fmt(this.total)} keys (${pct}%), ${fmt(Math.round(rate))} keys/s, ${eta}`;
  }

  private draw(force: boolean): void {
    if (!this.options.tty) return;
    const now = Date.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    if (this.total === undefined) {
      this.out.write(`\r\x1b[2K${this.status()}`);
      this.drawn = true;
      return;
    }
    const width = 30;
    const filled = this.total === 0 ? width : Math.round((this.done / this.total) * width);
    this.out.write(`\r\x1b[2K[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${this.status()}`);
    this.drawn = true;
  }

  private line(text: string): void {
    if (this.options.tty && this.drawn) this.out.write("\r\x1b[2K");
    this.out.write(`${text}\n`);
    if (this.options.tty && this.drawn) this.draw(true);
  }
}

export function fmt(n: number): string {
  return n.toLocaleString("en-US");
}

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "–";
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
