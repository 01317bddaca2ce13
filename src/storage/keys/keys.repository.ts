import { and, eq, type GetColumnData, isNull, type SQL, sql } from "drizzle-orm";
import { type Db, preparedPerHandle, rowsOf } from "../client.js";
import { epochNow, epochSum } from "../epoch.js";
import { indexFirstCte } from "../indexFirst.js";
import { decodeJsonValues, jsonFieldsOf } from "../jsonValues.js";
import { isPglite, type PgliteSelectOptions, preparePgliteSelect } from "../pglitePrepared.js";
import { apis, identities, keys, workspaces } from "../schema.js";
import { batchListsOf, type RatelimitOfBatch, type StoredRatelimit } from "./keys.columns.js";
import { effectiveRemaining, lastRefillAfterWrite } from "./keys.refill.js";

export type { StoredRatelimit } from "./keys.columns.js";

/**
 * Everything verification needs about the live keys with these hashes (`{ hashes }`), in one query, each row with
 * the verification epoch of the same snapshot. `remaining` is the stored value: only whether it is null matters
 * here, since spending reads and writes it in the database. Verification is the hot path: the verification cache
 * (verification.cache.ts) prepares it once and runs it as a prepared statement, instead of once per request:
 * drizzle then skips building the SQL, and the store skips planning it (postgres.js names its statements; on PGlite,
 * where drizzle's are not prepared, it is a PREPAREd statement: pglitePrepared.ts, which plans it again once its plan
 * is old, `pglite` saying when; the tests set it).
 *
 * The statement answers one JSON value on both stores: the epoch, the keys' own rows (with their API's and
 * workspace's), and what the batch's keys have in other tables as flat lists (keys.columns.ts, batchListsOf), which
 * are grouped per key here. One value, parsed once, instead of rows of fields each decoded on its own.
 */
export function prepareVerificationLookup(db: Db, pglite?: PgliteSelectOptions): VerificationLookup {
  const query = verificationLookupQuery(db);
  const { sql: text, params } = query.toSQL();
  // The hashes are the one parameter ($1): the PGlite statement passes nothing else.
  if (params.length !== 1) throw new Error(`the verification lookup takes one parameter, not ${params.length}`);
  if (isPglite(db)) {
    const statement = preparePgliteSelect<{ answer: LookupAnswer }>(
      db,
      "keyhaven_verification_lookup",
      text,
      { answer: lookupAnswer },
      pglite,
    );
    return { sql: text, execute: async ({ hashes }) => keysOfAnswer((await statement.execute(hashes))[0]?.answer) };
  }
  const prepared = query.prepare("keyhaven_verification_lookup");
  return { sql: text, execute: async (values) => keysOfAnswer((await prepared.execute(values))[0]?.answer) };
}

/** What verification reads of a key's own row, its API's and its workspace's, in this order in the list of keys. */
const keyFields = {
  hash: keys.hash,
  id: keys.id,
  workspaceId: keys.workspaceId,
  apiId: keys.apiId,
  name: keys.name,
  ownerId: keys.ownerId,
  meta: keys.meta,
  expires: keys.expires,
  remaining: keys.remaining,
  enabled: keys.enabled,
  environment: keys.environment,
  identityId: keys.identityId,
  workspaceEnabled: workspaces.enabled,
  apiIpWhitelist: apis.ipWhitelist,
};
const keyJsonFields = jsonFieldsOf(keyFields);
type KeyFields = { [K in keyof typeof keyFields]: GetColumnData<(typeof keyFields)[K]> };

/** The statement's one value (see batchListsOf for the lists); a list is null when it is empty. */
type LookupAnswer = {
  epoch: string;
  keys: unknown[][] | null;
  roles: [keyId: string, roleId: string, name: string][] | null;
  permissions: [keyId: string, slug: string][] | null;
  ratelimits: RatelimitOfBatch[] | null;
  identities: [id: string, externalId: string, meta: unknown][] | null;
};
const lookupAnswer = sql<LookupAnswer>`"lookup"."answer"`;

function verificationLookupQuery(db: Db) {
  const ids = sql`(select key_ids from batch_ids)::text[]`;
  const identityIds = sql`(select identity_ids from batch_ids)::text[]`;
  const lists = batchListsOf(ids, identityIds);
  // From the hash index whatever the statistics say (indexFirst.ts); the CTE is read as `keys` for the columns.
  const matched = indexFirstCte("matched", keys, sql`${keys.hash} = any(${sql.placeholder("hashes")}::text[])`);
  const liveKeys = sql`(select json_agg(json_build_array(${sql.join(Object.values(keyFields), sql`, `)}))
    from matched "keys"
    inner join ${apis} on ${and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM))}
    inner join ${workspaces} on ${eq(workspaces.id, keys.workspaceId)}
    where ${isNull(keys.deletedAtM)})`;
  return db.select({ answer: lookupAnswer }).from(sql`(with ${matched},
      batch_ids as (select array_agg(id) as key_ids,
        array_agg(identity_id) filter (where identity_id is not null) as identity_ids from matched)
    select json_build_object('epoch', ${epochSum}, 'keys', ${liveKeys}, 'roles', ${lists.roles},
      'permissions', ${lists.permissions}, 'ratelimits', ${lists.ratelimits}, 'identities', ${lists.identities}) as answer) "lookup"`);
}

/** A live key as verification reads it: its row, and what it has in other tables. */
export type KeyForVerification = Omit<KeyFields, "identityId" | "hash"> & {
  /** Found by its hash, so never a pending key's null (schema.ts). */
  hash: string;
  /** The verification epoch of the statement's snapshot (int8 as text): see verification.cache.ts. */
  epoch: string;
  roles: string[];
  /** Its roles' ids, only to tag the cached key (verification.cache.ts): a change to one of its roles drops it. */
  roleIds: string[];
  ratelimits: StoredRatelimit[];
  /** Direct permissions and those reached through roles, as slugs, each once, in order. */
  permissions: string[];
  /** Its identity (null: none, or gone). */
  identityId: string | null;
  identityExternalId: string | null;
  identityMeta: (typeof identities.$inferSelect)["meta"] | null;
};
/** The lookup, prepared; `sql` is the statement's text (its one parameter, `$1`, is the hashes). */
export type VerificationLookup = { sql: string; execute(values: { hashes: string[] }): Promise<KeyForVerification[]> };

/** `list`'s entries by the key `keyOf` gives each (skipped when null). */
function byKey<T>(list: readonly T[] | null, keyOf: (entry: T) => string | null): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const entry of list ?? []) {
    const key = keyOf(entry);
    if (key === null) continue;
    const entries = map.get(key);
    if (entries) entries.push(entry);
    else map.set(key, [entry]);
  }
  return map;
}

/** The answer's keys, each with its own roles, permissions, rate limits (its own first) and identity. */
function keysOfAnswer(answer: LookupAnswer | undefined): KeyForVerification[] {
  if (!answer?.keys) return [];
  const roles = byKey(answer.roles, (r) => r[0]);
  const permissions = byKey(answer.permissions, (p) => p[0]);
  const ownRatelimits = byKey(answer.ratelimits, (rl) => rl[0]);
  const identityRatelimits = byKey(answer.ratelimits, (rl) => rl[1]);
  const identitiesById = new Map((answer.identities ?? []).map((i) => [i[0], i]));
  return answer.keys.map((values) => {
    const row = decodeJsonValues<KeyFields>(keyJsonFields, values, "keyhaven_verification_lookup");
    const keyRoles = roles.get(row.id) ?? [];
    const identity = row.identityId === null ? undefined : identitiesById.get(row.identityId);
    const ofIdentity = row.identityId === null ? undefined : identityRatelimits.get(row.identityId);
    const ratelimits = [
      ...(ownRatelimits.get(row.id) ?? []).map((rl) => storedRatelimit(rl, "key")),
      ...(ofIdentity ?? []).map((rl) => storedRatelimit(rl, "identity")),
    ];
    return {
      hash: row.hash as string,
      epoch: answer.epoch,
      id: row.id,
      workspaceId: row.workspaceId,
      apiId: row.apiId,
      name: row.name,
      ownerId: row.ownerId,
      meta: row.meta,
      expires: row.expires,
      remaining: row.remaining,
      enabled: row.enabled,
      environment: row.environment,
      workspaceEnabled: row.workspaceEnabled,
      apiIpWhitelist: row.apiIpWhitelist,
      roles: keyRoles.map((r) => r[2]),
      roleIds: keyRoles.map((r) => r[1]),
      ratelimits,
      permissions: (permissions.get(row.id) ?? []).map((p) => p[1]),
      identityId: identity ? identity[0] : null,
      identityExternalId: identity ? identity[1] : null,
      identityMeta: identity ? (identities.meta.mapFromDriverValue(identity[2]) as KeyForVerification["identityMeta"]) : null,
    };
  });
}

function storedRatelimit([, , id, name, limit, duration, autoApply]: RatelimitOfBatch, owner: StoredRatelimit["owner"]): StoredRatelimit {
  return { id, name, limit, duration, autoApply, owner };
}

/** The most keys one statement of readRemainingOf reads. */
export const MAX_REMAINING_READS_PER_STATEMENT = 1000;

/** readRemainingOf's statement, prepared once per database handle: it is on the path of refused v2 verifications. */
const remainingRead = preparedPerHandle((db) =>
  db
    .select({ id: keys.id, left: effectiveRemaining })
    .from(keys)
    .where(sql`${keys.id} = any(${sql.placeholder("ids")}::text[]) and ${keys.deletedAtM} is null`)
    .prepare("keyhaven_read_remaining"),
);

/**
 * The uses left now of each of these keys (at most MAX_REMAINING_READS_PER_STATEMENT), with every due refill applied
 * (no write), in one statement; a key that is gone or unlimited has none in the map.
 */
export async function readRemainingOf(db: Db, keyIds: readonly string[]): Promise<Map<string, number>> {
  if (keyIds.length > MAX_REMAINING_READS_PER_STATEMENT) {
    throw new RangeError(`readRemainingOf takes at most ${MAX_REMAINING_READS_PER_STATEMENT} keys, got ${keyIds.length}`);
  }
  const left = new Map<string, number>();
  if (keyIds.length === 0) return left;
  for (const row of await remainingRead(db).execute({ ids: keyIds })) {
    if (row.left !== null) left.set(row.id, Number(row.left));
  }
  return left;
}

/**
 * One group of verifications of a key, all at one cost: `count` spends of `cost` uses each. With `ifEpochAtMost`, the
 * group is spent only if the statement's snapshot finds the verification epoch no newer than that (see
 * RemainingSpender.spendIfCurrent); else it gets no answer, as a key that is gone does.
 */
export type SpendRequest = { keyId: string; cost: number; count: number; ifEpochAtMost?: bigint | undefined };
/** A group's outcome: the uses left before its spends and how many of them (the first ones, in order) got their uses. */
export type SpendResult = { before: number; granted: number };

/** The most groups one statement spends (what a statement's size and its row locks are bounded by). */
export const MAX_SPENDS_PER_STATEMENT = 1000;

/**
 * The spend groups of a statement (a jsonb array of `{ g, id, cost, n, e }`, SpendRequest's fields) as rows, less the
 * groups whose epoch condition `e` fails at the statement's snapshot (null: unconditional): they are left out before
 * any row is locked, and get no answer. Every spending statement reads its groups through this.
 */
function groupsWithCurrentEpoch(groups: SQL): SQL {
  return sql`(select * from jsonb_to_recordset(${groups}) as r(g int, id text, cost int, n int, e bigint)
    where r.e is null or ${epochNow} <= r.e)`;
}

/**
 * The statements that spend remaining uses, prepared once per database handle (the RemainingSpender's): spending is
 * on the hot path of every verification of a key with a usage limit, and a statement sent with `db.execute` is
 * parsed and planned by PostgreSQL each time (and built by drizzle each time), which cost more than the spends it
 * carried. The two frequent shapes (one group; groups of distinct keys) are prepared statements with the same text
 * whatever the batch; groups that share a key (rare: one key verified at two costs at once) are built each time.
 */
export function prepareSpendStatements(db: Db) {
  const count = sql`${sql.placeholder("count")}::int`;
  const cost = sql`${sql.placeholder("cost")}::int`;
  const one = db
    .update(keys)
    .set({
      remaining: sql`cur.before - ${cost} * ${granted(count, cost, sql`cur.before`)}`,
      lastRefillAt: lastRefillAfterWrite,
    })
    .from(
      sql`(select ${keys.id} as id, ${effectiveRemaining} as before from ${keys}
        where ${keys.id} = ${sql.placeholder("keyId")} and ${keys.remaining} is not null
          and (${sql.placeholder("ifEpochAtMost")}::bigint is null or ${epochNow} <= ${sql.placeholder("ifEpochAtMost")}::bigint)
        for update) cur`,
    )
    .where(sql`${keys.id} = cur.id`)
    .returning({ before: sql<number>`cur.before` })
    .prepare("keyhaven_spend_one");
  // Each group's grant is computed from its key's uses alone; the keys' rows are locked first, in the order of
  // their ids (lockedRows, a subquery here: it is read once), so that concurrent statements wait for each other
  // instead of deadlocking. The groups are read from their JSON once (`req`, used twice): read at each use, the same
  // parameter was sent and parsed twice, 8–15% of PostgreSQL's CPU per statement of 23 groups (issue 13 §0,
  // docs/benchmarks.md).
  const distinct = db
    .update(keys)
    .set({ remaining: sql`spend.before - spend.cost * spend.granted`, lastRefillAt: lastRefillAfterWrite })
    .from(
      sql`(with ${requestedGroups(sql`${sql.placeholder("groups")}::jsonb`)}
        select cur.id, cur.before, r.g, r.cost, ${granted(sql`r.n`, sql`r.cost`, sql`cur.before`)} as granted
        from (${lockedRows}) cur join req r on r.id = cur.id) spend`,
    )
    .where(sql`${keys.id} = spend.id`)
    .returning({ g: sql<number>`spend.g`, before: sql<number>`spend.before`, granted: sql<number>`spend.granted` })
    .prepare("keyhaven_spend_keys");
  return { db, one, distinct };
}

export type SpendStatements = ReturnType<typeof prepareSpendStatements>;

/**
 * Spends the uses of many groups of verifications, of any number of keys, in one atomic statement (one commit),
 * after applying every refill that is due, once. The keys' rows are locked first, in the order of their ids (so that
 * concurrent statements, on any number of processes, wait for each other instead of deadlocking, and never
 * overdraw), and each group is answered with the uses its key had before its spends and how many of its `count`
 * spends were granted: the first `granted`, in order, as far as the uses go (all of them when `cost` is 0). Groups
 * of one key are applied in the order given, each on what the previous one left. An answer is undefined when the
 * key is gone or has no usage limit, or when the group's `ifEpochAtMost` is older than the epoch the statement
 * finds (nothing is spent for it, and the key's later groups spend from what the earlier ones left). At most
 * MAX_SPENDS_PER_STATEMENT groups.
 */
export async function spendRemaining(statements: SpendStatements, requests: readonly SpendRequest[]): Promise<(SpendResult | undefined)[]> {
  if (requests.length === 0) return [];
  if (requests.length > MAX_SPENDS_PER_STATEMENT) {
    throw new RangeError(`spendRemaining takes at most ${MAX_SPENDS_PER_STATEMENT} groups, got ${requests.length}`);
  }
  // The simplest statement that does: one key with one cost (a hot key) is the most frequent batch.
  if (requests.length === 1) return [await spendGroup(statements, requests[0]!)];
  // One JSON parameter whatever the number of groups: the statement's text is the same for every batch, and the
  // parameter the same on both drivers.
  const groups = JSON.stringify(
    requests.map((r, g) => ({
      g,
      id: r.keyId,
      cost: r.cost,
      n: r.count,
      e: r.ifEpochAtMost === undefined ? null : r.ifEpochAtMost.toString(),
    })),
  );
  const oneGroupPerKey = new Set(requests.map((r) => r.keyId)).size === requests.length;
  const rows = oneGroupPerKey
    ? await statements.distinct.execute({ groups })
    : rowsOf<{ g: number; before: number; granted: number }>(await statements.db.execute(spendGroupsInOrder(sql`${groups}::jsonb`)));
  const results: (SpendResult | undefined)[] = requests.map(() => undefined);
  for (const row of rows) results[row.g] = { before: Number(row.before), granted: Number(row.granted) };
  return results;
}

/**
 * How many of `n` spends of `cost` uses each the `before` uses grant: as many as they cover, all of them when the cost
 * is 0 (every spending statement's rule; spendGroup computes the same for the one-group statement's answer).
 */
function granted(n: SQL, cost: SQL, before: SQL): SQL {
  return sql`least(${n}, case when ${cost} = 0 then ${n} else ${before} / ${cost} end)`;
}

/** The rows of the groups' keys (CTE `req`), locked in the order of their ids, with their uses after every due refill. */
const lockedRows = sql`select ${keys.id} as id, ${effectiveRemaining} as before from ${keys}
  where ${keys.id} in (select id from req) and ${keys.remaining} is not null
  order by ${keys.id} for update`;
/** The same as the CTE `cur`, materialized: the statement below reads it twice. */
const lockedKeys = sql`cur as materialized (${lockedRows})`;
/** The groups as the CTE `req` (materialized: read once, however often the statement uses it). */
const requestedGroups = (groups: SQL) => sql`req as materialized ${groupsWithCurrentEpoch(groups)}`;
const spendAndRefill = (spent: SQL) => sql`update ${keys} set ${sql.identifier(keys.remaining.name)} = cur.before - ${spent},
  ${sql.identifier(keys.lastRefillAt.name)} = ${lastRefillAfterWrite}`;

/** Groups of which some share a key: each of a key's groups is granted from what the previous one left. */
function spendGroupsInOrder(groups: SQL): SQL {
  return sql`with recursive ${requestedGroups(groups)}, ${lockedKeys},
    grp as (select g, id, cost, n, row_number() over (partition by id order by g) as step from req),
    walk as (
      select grp.id, grp.step, grp.g, grp.cost, cur.before, ${granted(sql`grp.n`, sql`grp.cost`, sql`cur.before`)} as granted
      from grp join cur on cur.id = grp.id where grp.step = 1
      union all
      select nx.id, nx.step, nx.g, nx.cost, w.before - w.cost * w.granted,
        ${granted(sql`nx.n`, sql`nx.cost`, sql`(w.before - w.cost * w.granted)`)}
      from walk w join grp nx on nx.id = w.id and nx.step = w.step + 1),
    spent as (select id, sum(cost::bigint * granted) as uses from walk group by id),
    upd as (${spendAndRefill(sql`spent.uses`)}
      from cur join spent on spent.id = cur.id
      where ${keys.id} = cur.id
      returning ${keys.id})
    select g, before::int as before, granted::int as granted from walk`;
}

/** One group, of one key (the statement the batches of one key used before there were batches across keys). */
async function spendGroup(
  statements: SpendStatements,
  { keyId, cost, count, ifEpochAtMost }: SpendRequest,
): Promise<SpendResult | undefined> {
  const rows = await statements.one.execute({ keyId, cost, count, ifEpochAtMost: ifEpochAtMost?.toString() ?? null });
  const before = rows[0]?.before;
  if (before === undefined || before === null) return undefined;
  return { before, granted: count === 0 ? 0 : cost === 0 ? count : Math.min(count, Math.floor(before / cost)) };
}
