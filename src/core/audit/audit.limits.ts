// The audit log reader's bounds, apart from audit.read.ts so that `keyhaven audit export` names them without
// loading the store (src/cli/main.ts).

/** Entries per page at most, and by default. */
export const MAX_AUDIT_PAGE = 100;
export const DEFAULT_AUDIT_PAGE = 50;

/**
 * Oldest first, a page leaves out the entries of the last AUDIT_SETTLE_MS: an entry's time is taken just before its
 * change commits, so one still committing can bear a time below entries already read; once its time is this far
 * behind, its change has committed or rolled back (each statement is bounded by DATABASE_STATEMENT_TIMEOUT_MS, 5 s by
 * default, and a change's entry is written by its last statements), and a cursor moving up can no longer pass an
 * entry that appears below it. Replicas take an entry's time from their own clocks: they must agree within this
 * margin too (NTP does). Newest first needs no margin: what commits late is read further down, or is newer than the
 * reader's first page.
 */
export const AUDIT_SETTLE_MS = 10_000;
