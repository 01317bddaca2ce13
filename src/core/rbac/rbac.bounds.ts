import { InvalidInputError } from "../../errors.js";

/**
 * The most distinct role and permission names one request may name, and so the most it may create: 2,000, what the
 * largest single-key request names (v1's keys.createKey: 1,000 roles and 1,000 permissions), so that no single-key
 * request is refused by it. Counted per request, not per key: a batch of 100 keys naming 100 new names each (10,000)
 * held the event loop for seconds and, on the embedded store, sent a statement that PGlite cannot parse the answer
 * of (docs/operations.md#one-request-and-the-embedded-store).
 */
export const MAX_NAMES_PER_REQUEST = 2_000;

/**
 * The most links one request may write: a key to a role or a permission, or a role to a permission. 10,000: a full
 * batch of 100 keys with 100 roles and permissions each (migrations ask for a few per key).
 */
export const MAX_LINKS_PER_REQUEST = 10_000;

/** What a request names, per key (or per role): its roles by name and its permissions by name or slug. */
export type NamingItem = { readonly roles?: readonly string[] | undefined; readonly permissions?: readonly string[] | undefined };

/**
 * The one per-request bound of every route that creates or connects roles and permissions (the imports, keys.createKey,
 * the key RBAC routes, keys.updateKey, permissions.createRole and setRolePermissions): at most MAX_NAMES_PER_REQUEST
 * distinct names (roles and permissions counted apart, then added) and MAX_LINKS_PER_REQUEST links (one per distinct
 * name of each item). Checked before anything is read or written, so a refused request writes nothing; the refusal
 * is bad input (InvalidInputError `tooManyNames`) naming the bound and the count.
 */
export function requireNamesWithinBounds(items: readonly NamingItem[]): void {
  const roles = new Set<string>();
  const permissions = new Set<string>();
  let links = 0;
  for (const item of items) {
    const itemRoles = new Set(item.roles ?? []);
    const itemPermissions = new Set(item.permissions ?? []);
    links += itemRoles.size + itemPermissions.size;
    for (const r of itemRoles) roles.add(r);
    for (const p of itemPermissions) permissions.add(p);
  }
  const names = roles.size + permissions.size;
  if (names > MAX_NAMES_PER_REQUEST) {
    throw new InvalidInputError({ kind: "tooManyNames", what: "names", count: names, max: MAX_NAMES_PER_REQUEST });
  }
  if (links > MAX_LINKS_PER_REQUEST) {
    throw new InvalidInputError({ kind: "tooManyNames", what: "links", count: links, max: MAX_LINKS_PER_REQUEST });
  }
}
