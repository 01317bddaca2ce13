import type { PermissionQuery } from "../../errors.js";

/**
 * v2's URN permissions (contract §1.5): `unkey:v1:<workspaceId>:<path>#<action>`, where a root key's granted URN
 * may cover many required ones (`*` one path segment, a trailing `**` any rest, action `*` with path `**`). A root
 * key's permission check is the one place they are understood (rootKeySatisfies); a verification's permission
 * query stays literal, as both APIs define it.
 */

const PREFIX = "unkey:v1:";

type Urn = { workspaceId: string; path: string[]; action: string };

/** The URN permission a route requires: `unkey:v1:<workspaceId>:<path>#<action>`. */
export function urnPermission(workspaceId: string, path: string, action: string): string {
  return `${PREFIX}${workspaceId}:${path}#${action}`;
}

/** A URN permission's parts, or undefined when the string is not one (the grammar of contract §1.5). */
export function parseUrn(value: string): Urn | undefined {
  if (!value.startsWith(PREFIX)) return undefined;
  const rest = value.slice(PREFIX.length);
  const colon = rest.indexOf(":");
  if (colon <= 0) return undefined;
  const workspaceId = rest.slice(0, colon);
  if (/[#/]/.test(workspaceId)) return undefined;
  const resource = rest.slice(colon + 1);
  const hash = resource.indexOf("#");
  if (hash < 0 || resource.indexOf("#", hash + 1) >= 0) return undefined;
  const path = resource.slice(0, hash).split("/");
  const action = resource.slice(hash + 1);
  for (const [i, segment] of path.entries()) {
    if (segment === "" || /[:#]/.test(segment)) return undefined;
    if (segment === "**" && i !== path.length - 1) return undefined;
    if (segment.includes("*") && segment !== "*" && segment !== "**") return undefined;
  }
  if (action === "*") {
    if (path.length !== 1 || path[0] !== "**") return undefined;
  } else if (action === "" || /[:#/*]/.test(action) || action.startsWith("_") || action.endsWith("_")) {
    return undefined;
  }
  return { workspaceId, path, action };
}

/**
 * Whether a granted URN covers a required one: same workspace, the same action (or `*`), and a path where a granted
 * `*` matches any one segment and a trailing `**` any rest. A `*` in the required path ("any key") is only covered by
 * a granted `*` or `**` there, never by a concrete id.
 */
export function urnCovers(granted: Urn, required: Urn): boolean {
  if (granted.workspaceId !== required.workspaceId) return false;
  if (granted.action !== "*" && granted.action !== required.action) return false;
  for (const [i, segment] of granted.path.entries()) {
    if (segment === "**") return true;
    const wanted = required.path[i];
    if (wanted === undefined) return false;
    if (segment !== "*" && (segment !== wanted || wanted === "*")) return false;
  }
  return granted.path.length === required.path.length;
}

/** The URNs among a root key's permissions, parsed once per set (a root key's set lives as long as its cache entry). */
const grantedUrns = new WeakMap<ReadonlySet<string>, Urn[]>();

function urnsOf(held: ReadonlySet<string>): Urn[] {
  let urns = grantedUrns.get(held);
  if (urns === undefined) {
    urns = [...held].flatMap((p) => {
      const urn = parseUrn(p);
      return urn ? [urn] : [];
    });
    grantedUrns.set(held, urns);
  }
  return urns;
}

/** Whether a root key holding `held` holds the permission `leaf`: literally, or through a URN that covers it. */
export function rootKeyHolds(held: ReadonlySet<string>, leaf: string): boolean {
  if (held.has(leaf)) return true;
  if (!leaf.startsWith(PREFIX)) return false;
  const required = parseUrn(leaf);
  return required !== undefined && urnsOf(held).some((granted) => urnCovers(granted, required));
}

/**
 * A root key's permission check: `and`/`or` over leaves, each held literally (`*` and tuples such as
 * `api.*.create_key` are names, never globs) or, for a URN leaf, covered by a granted URN.
 */
export function rootKeySatisfies(query: PermissionQuery, held: ReadonlySet<string>): boolean {
  if (typeof query === "string") return rootKeyHolds(held, query);
  if ("and" in query) return query.and.every((q) => rootKeySatisfies(q, held));
  return query.or.some((q) => rootKeySatisfies(q, held));
}
