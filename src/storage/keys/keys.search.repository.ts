import { and, asc, eq, gt, inArray, isNotNull, isNull, lte, or, type SQL, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { identities, keyLastUsed, keys } from "../schema.js";

// The console's table of an API's keys (core/apis/apis.core.ts searchApiKeys): a page of light rows (no roles,
// permissions or ciphertext), searched and filtered, in id order from a cursor. Every form of it is one statement
// that an index of the API's keys serves (schema.ts, migration 0021), whatever the API's size:
// - no search, `all`/`enabled`: keys_live_by_api_idx (api_id, id) walked in id order from the cursor, stopping at
//   the page's end;
// - `disabled`: keys_disabled_by_api_idx (api_id, id where enabled = false), the same walk among disabled keys;
// - `expired`: keys_expiring_by_api_idx (api_id, expires), the expired keys' range, sorted by id;
// - `pending`: keys_pending_idx (workspace_id, api_id where hash is null);
// - a search: a BitmapOr of keys_name_prefix_idx (lower(name) text_pattern_ops), keys_start_prefix_idx (start
//   text_pattern_ops), keys_identity_idx (the identity of that externalId) and keys_owner_idx, then sorted by id.

export type KeyListFilter = "all" | "enabled" | "disabled" | "expired" | "pending";
export const KEY_LIST_FILTERS: readonly KeyListFilter[] = ["all", "enabled", "disabled", "expired", "pending"];

export type KeyListRow = {
  id: string;
  name: string | null;
  start: string;
  ownerId: string | null;
  externalId: string | null;
  enabled: boolean;
  expires: Date | null;
  createdAtM: number;
  /** Copied from hosted Unkey without its secret and not adopted yet (no hash). */
  pending: boolean;
  /** The key's last verification as last written (storage/lastUsed); null: never verified. */
  lastUsedAtM: number | null;
};

/** `text` as the start of a LIKE pattern: its `%`, `_` and `\` taken literally. */
const prefixPattern = (text: string): string => `${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * The range of the strings that start with `prefix`, in the byte order of text_pattern_ops (UTF-8's bytes, which
 * sort as the code points do): from `prefix` itself, up to but not including `prefix` with its last code point one
 * higher (the surrogates skipped; a last U+10FFFF dropped and the one before raised), or no upper end for a prefix
 * of U+10FFFF only.
 */
export function prefixRange(prefix: string): { from: string; below: string | undefined } {
  const points = [...prefix].map((c) => c.codePointAt(0)!);
  while (points.length > 0) {
    const last = points.pop()!;
    if (last === 0x10ffff) continue;
    points.push(last === 0xd7ff ? 0xe000 : last + 1);
    return { from: prefix, below: String.fromCodePoint(...points) };
  }
  return { from: prefix, below: undefined };
}

/**
 * `value` starts with `prefix`: LIKE, which decides, and the same as a range (prefixRange) an index of `value` with
 * text_pattern_ops serves even in a generic plan. PostgreSQL plans a prepared statement (postgres.js prepares each)
 * for its parameters' values only for its first five runs; from then on it may keep one plan for any values, and
 * `like $1` in such a plan cannot use the index: the search walked every key of the API (118 ms at 100,000 keys,
 * against 0.1 ms with the range).
 */
function startsWith(value: SQL, prefix: string): SQL {
  const { from, below } = prefixRange(prefix);
  const upper = below === undefined ? sql`` : sql` and ${value} ~<~ ${below}`;
  return sql`(${value} ~>=~ ${from}${upper} and ${value} like ${prefixPattern(prefix)})`;
}

function filterCondition(filter: KeyListFilter, now: Date): SQL | undefined {
  switch (filter) {
    case "all":
      return undefined;
    case "enabled":
      return eq(keys.enabled, true);
    case "disabled":
      return eq(keys.enabled, false);
    case "expired":
      return and(isNotNull(keys.expires), lte(keys.expires, now));
    case "pending":
      return isNull(keys.hash);
  }
}

/**
 * Up to `limit` live keys of a live API of the workspace, by id after `after` (exclusive): those matching `search`
 * (a prefix of the name in any case or of the start, or exactly the owner's id or the identity's externalId) and
 * `filter` (expired: expiry at or before `now`), or with `ids` only those.
 */
export async function searchApiKeysPage(db: Db, input: KeySearch): Promise<KeyListRow[]> {
  return searchApiKeysQuery(db, input);
}

export type KeySearch = {
  workspaceId: string;
  apiId: string;
  search?: string | undefined;
  filter: KeyListFilter;
  ids?: readonly string[] | undefined;
  now: number;
  after?: string | undefined;
  limit: number;
};

/** searchApiKeysPage's statement, not run (its SQL is what test/console.apis.test.ts plans). */
export function searchApiKeysQuery(db: Db, input: KeySearch) {
  const search = input.search === undefined || input.search === "" ? undefined : input.search;
  const matches =
    search === undefined
      ? undefined
      : or(
          startsWith(sql`lower(${keys.name})`, search.toLowerCase()),
          startsWith(sql`${keys.start}`, search),
          eq(keys.ownerId, search),
          // One identity at most (unique per workspace): a scalar subquery, so its id is an index condition.
          sql`${keys.identityId} = (select ${identities.id} from ${identities}
            where ${identities.workspaceId} = ${input.workspaceId} and ${identities.externalId} = ${search})`,
        );
  return db
    .select({
      id: keys.id,
      name: keys.name,
      start: keys.start,
      ownerId: keys.ownerId,
      externalId: identities.externalId,
      enabled: keys.enabled,
      expires: keys.expires,
      createdAtM: keys.createdAtM,
      pending: sql<boolean>`${keys.hash} is null`,
      // From a left join on key_last_used's primary key (one row per key at most): the index serving the page drives it.
      lastUsedAtM: keyLastUsed.lastUsedAtM,
    })
    .from(keys)
    .leftJoin(identities, eq(identities.id, keys.identityId))
    .leftJoin(keyLastUsed, eq(keyLastUsed.keyId, keys.id))
    .where(
      and(
        eq(keys.apiId, input.apiId),
        eq(keys.workspaceId, input.workspaceId),
        isNull(keys.deletedAtM),
        matches,
        filterCondition(input.filter, new Date(input.now)),
        input.ids !== undefined ? inArray(keys.id, [...input.ids]) : undefined,
        input.after !== undefined ? gt(keys.id, input.after) : undefined,
      ),
    )
    .orderBy(asc(keys.id))
    .limit(input.limit);
}
