import { sql } from "drizzle-orm";
import { type Db, preparedPerHandle, rowsOf } from "../client.js";
import { keyLastUsed, rootKeyLastUsed } from "../schema.js";

/** A time to write: a key's (or root key's) id and the latest use seen of it, unix ms. */
export type LastUsedRow = { id: string; at: number };

/**
 * Writes the latest use of many keys in one statement (ids and times as two array parameters, zipped by `unnest`),
 * never moving a time back: a replica whose flush runs late, or a retry of an old time, changes nothing (and then
 * writes no new row version either).
 */
const keysUpsert = preparedPerHandle((db) =>
  db
    .insert(keyLastUsed)
    .select(sql`select k, t from unnest(${sql.placeholder("ids")}::text[], ${sql.placeholder("ats")}::int8[]) as u(k, t)`)
    .onConflictDoUpdate({
      target: keyLastUsed.keyId,
      set: { lastUsedAtM: sql`excluded.last_used_at_m` },
      setWhere: sql`${keyLastUsed.lastUsedAtM} < excluded.last_used_at_m`,
    })
    .prepare("keyhaven_key_last_used"),
);

/** keysUpsert for root keys. */
const rootKeysUpsert = preparedPerHandle((db) =>
  db
    .insert(rootKeyLastUsed)
    .select(sql`select k, t from unnest(${sql.placeholder("ids")}::text[], ${sql.placeholder("ats")}::int8[]) as u(k, t)`)
    .onConflictDoUpdate({
      target: rootKeyLastUsed.rootKeyId,
      set: { lastUsedAtM: sql`excluded.last_used_at_m` },
      setWhere: sql`${rootKeyLastUsed.lastUsedAtM} < excluded.last_used_at_m`,
    })
    .prepare("keyhaven_root_key_last_used"),
);

const byId = (a: LastUsedRow, b: LastUsedRow) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Writes the rows (each id once) in one statement, in id order: the statement locks the rows in the order it gets
 * them, and two replicas writing the same keys in the orders they saw them could deadlock (as the counts did).
 */
export async function upsertLastUsed(db: Db, of: "keys" | "rootKeys", rows: readonly LastUsedRow[]): Promise<void> {
  if (rows.length === 0) return;
  const sorted = [...rows].sort(byId);
  const statement = of === "keys" ? keysUpsert(db) : rootKeysUpsert(db);
  await statement.execute({ ids: sorted.map((r) => r.id), ats: sorted.map((r) => r.at) });
}

/**
 * Deletes the times of keys that no longer exist, `chunk` rows of `key_last_used` per statement in key order (each
 * statement short, whatever the table's size); `between` runs between statements (yields to the event loop). The
 * delete trigger of `keys` removes a key's row with the key; what is left is a race: a time written by a flush that
 * started before the key's deletion committed. Answers how many rows went.
 */
export async function deleteOrphanedLastUsed(db: Db, chunk: number, between: () => Promise<void>): Promise<number> {
  let total = 0;
  let after = "";
  for (;;) {
    const [row] = rowsOf<{ last: string | null; deleted: unknown }>(
      await db.execute(sql`
        with chunk as (select key_id from key_last_used where key_id > ${after} order by key_id limit ${chunk}),
        gone as (
          delete from key_last_used where key_id in (
            select c.key_id from chunk c where not exists (select 1 from keys k where k.id = c.key_id))
          returning 1)
        select (select max(key_id) from chunk) as last, (select count(*) from gone)::int8 as deleted`),
    );
    total += Number(row?.deleted ?? 0);
    if (row?.last === null || row?.last === undefined) break;
    after = row.last;
    await between();
  }
  const [roots] = rowsOf<{ deleted: unknown }>(
    await db.execute(sql`
      with gone as (
        delete from root_key_last_used l where not exists (select 1 from root_keys r where r.id = l.root_key_id)
        returning 1)
      select count(*)::int8 as deleted from gone`),
  );
  return total + Number(roots?.deleted ?? 0);
}
