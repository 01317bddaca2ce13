/**
 * Where business time comes from (expiry, analytics hours, rate-limit windows, remembered answers): part of the
 * services (services.ts), so that a test can set the time instead of waiting for it.
 */
export type Clock = { now(): number };

/** The machine's clock: Date.now(). */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to (tests): starts at `start`, moved by `set` and `advance`. */
export class ManualClock implements Clock {
  constructor(private ms: number = Date.now()) {}

  now(): number {
    return this.ms;
  }

  set(ms: number): void {
    this.ms = ms;
  }

  advance(ms: number): void {
    this.ms += ms;
  }
}
