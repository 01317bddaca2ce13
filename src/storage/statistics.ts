import { performance } from "node:perf_hooks";
import { getTableName, sql } from "drizzle-orm";
import { type Db, rowsOf, type Store } from "./client.js";
import { encryptedKeys, identities, keys, keysPermissions, keysRoles, ratelimits } from "./schema.js";

type Logger = { warn(obj: unknown, msg?: string): void };

/** The tables an import writes (migrations.createKeys, the enqueueKeys worker), analysed together. */
const IMPORTED_TABLES = [keys, encryptedKeys, identities, keysRoles, keysPermissions, ratelimits].map((t) => getTableName(t));

/** An ANALYZE waits for this long without a new import, so that the batches of one import make one ANALYZE… */
export const ANALYZE_QUIET_MS = 1_000;
/** …but runs at the latest this long after the first import it is due for, even while batches keep coming. */
export const ANALYZE_MAX_DELAY_MS = 15_000;
/**
 * An ANALYZE is due once imports added more keys than this plus ANALYZE_SCALE_FACTOR of the keys counted by the
 * last one: what PostgreSQL's autovacuum decides with its defaults (autovacuum_analyze_threshold 50,
 * autovacuum_analyze_scale_factor 0.1).
 */
export const ANALYZE_THRESHOLD = 50;
export const ANALYZE_SCALE_FACTOR = 0.1;

export type StatisticsRefresherOptions = { quietMs?: number; maxDelayMs?: number };

/**
 * Refreshes the planner's statistics of the imported tables after bulk imports, where the store does not: PGlite
 * runs no autovacuum, so a table filled by an import would never be analysed. The lookups by hash do not depend on
 * statistics (indexFirst.ts); every other query over `keys` (listKeys, counts, joins) does.
 *
 * On PostgreSQL it does nothing: autovacuum analyses a table after the same amount of change (it wakes every
 * autovacuum_naptime, 1 min by default), each replica would repeat the work, and what must not wait for it does not.
 *
 * Imports report what they committed (onImported); the ANALYZE runs in the background, debounced (ANALYZE_QUIET_MS,
 * at most ANALYZE_MAX_DELAY_MS late), one at a time. Its work is bounded whatever the table's size: ANALYZE reads a
 * sample of 300 × default_statistics_target rows (30,000; measured 130 ms on PGlite for 1,000,000 keys). That is
 * its deadline on PGlite, which has no statement_timeout and runs one statement at a time, so verifications wait
 * for it once. stop() runs one still due and waits for it, so a store closed right after an import is analysed.
 */
export class StatisticsRefresher {
  private readonly enabled: boolean;
  private readonly quietMs: number;
  private readonly maxDelayMs: number;
  private log: Logger = { warn: () => {} };
  private started = false;
  /** Keys imported since the last ANALYZE started. */
  private imported = 0;
  /** Keys counted by the last ANALYZE (pg_class.reltuples); 0 before the first. */
  private analysedRows = 0;
  private dueSince: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** ANALYZEs run by this process (for tests and logs). */
  runs = 0;

  constructor(
    private readonly db: Db,
    storeKind: Store["kind"],
    options: StatisticsRefresherOptions = {},
  ) {
    this.enabled = storeKind === "pglite";
    this.quietMs = options.quietMs ?? ANALYZE_QUIET_MS;
    this.maxDelayMs = options.maxDelayMs ?? ANALYZE_MAX_DELAY_MS;
  }

  start(log?: Logger): void {
    if (log) this.log = log;
    this.started = true;
    if (this.due()) this.schedule();
  }

  /** An import committed `count` keys. */
  onImported(count: number): void {
    if (!this.enabled || count <= 0) return;
    this.imported += count;
    if (this.started && this.due()) this.schedule();
  }

  /** Stops scheduling; runs the ANALYZE that is due, if one is, and waits for the one running. */
  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.due()) this.run();
    await this.running;
  }

  private due(): boolean {
    return this.imported > ANALYZE_THRESHOLD + ANALYZE_SCALE_FACTOR * this.analysedRows;
  }

  private schedule(): void {
    const now = performance.now();
    this.dueSince ??= now;
    clearTimeout(this.timer);
    const wait = Math.max(0, Math.min(this.quietMs, this.dueSince + this.maxDelayMs - now));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.run();
    }, wait);
    this.timer.unref();
  }

  /** Starts an ANALYZE after the one running, if any. */
  private run(): void {
    this.imported = 0;
    this.dueSince = undefined;
    const previous = this.running ?? Promise.resolve();
    const current = previous.then(() => this.analyze());
    this.running = current;
    void current.finally(() => {
      if (this.running === current) this.running = undefined;
    });
  }

  private async analyze(): Promise<void> {
    try {
      await this.db.execute(sql.raw(`analyze ${IMPORTED_TABLES.map((t) => `"${t}"`).join(", ")}`));
      this.runs++;
      const [row] = rowsOf<{ rows: number }>(
        await this.db.execute(sql`select reltuples::float8 as rows from pg_class where oid = ${getTableName(keys)}::regclass`),
      );
      this.analysedRows = Math.max(0, Number(row?.rows ?? 0));
    } catch (err) {
      // Statistics are an optimisation: the next import schedules another ANALYZE.
      this.log.warn({ err }, "refreshing the planner's statistics after an import failed");
    }
  }
}
