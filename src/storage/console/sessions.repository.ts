import { and, eq, gt } from "drizzle-orm";
import type { Db } from "../client.js";
import { deleteRowsBefore } from "../prune.js";
import { consoleSessions } from "../schema.js";

export type ConsoleSessionRow = typeof consoleSessions.$inferSelect;

export async function insertConsoleSession(db: Db, row: ConsoleSessionRow): Promise<void> {
  await db.insert(consoleSessions).values(row);
}

/** The session of `idHash` unless it has expired at `now` (idle since before `idleSince`, or past its end). */
export async function findLiveConsoleSession(
  db: Db,
  idHash: string,
  now: number,
  idleSince: number,
): Promise<ConsoleSessionRow | undefined> {
  const [row] = await db
    .select()
    .from(consoleSessions)
    .where(and(eq(consoleSessions.idHash, idHash), gt(consoleSessions.expiresAtM, now), gt(consoleSessions.lastSeenAtM, idleSince)))
    .limit(1);
  return row;
}

export async function touchConsoleSession(db: Db, idHash: string, now: number): Promise<void> {
  await db.update(consoleSessions).set({ lastSeenAtM: now }).where(eq(consoleSessions.idHash, idHash));
}

/** Deletes the session of `idHash`; returns whether there was one. */
export async function deleteConsoleSession(db: Db, idHash: string): Promise<ConsoleSessionRow | undefined> {
  const [row] = await db.delete(consoleSessions).where(eq(consoleSessions.idHash, idHash)).returning();
  return row;
}

/** Deletes up to `maxRows` sessions that ended before `before` (unix ms); returns how many went. */
export function deleteConsoleSessionsEndedBefore(db: Db, before: number, maxRows: number): Promise<number> {
  return deleteRowsBefore(db, consoleSessions, consoleSessions.expiresAtM, before, maxRows);
}
