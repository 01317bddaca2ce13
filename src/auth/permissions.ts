import { z } from "zod";

/** A permission query: a permission string, or `{and: [...]}` / `{or: [...]}` of queries, nested. */
export type PermissionQuery = string | { and: PermissionQuery[] } | { or: PermissionQuery[] };

export const permissionQuerySchema: z.ZodType<PermissionQuery> = z.lazy(() =>
  z.union([
    z.string().min(1),
    z.strictObject({ and: z.array(permissionQuerySchema).min(1) }),
    z.strictObject({ or: z.array(permissionQuerySchema).min(1) }),
  ]),
);

/** Literal matching, as v1 does: `*` and `api.*.create_key` are names that must be held, never globs. */
export function satisfies(query: PermissionQuery, held: ReadonlySet<string>): boolean {
  if (typeof query === "string") return held.has(query);
  if ("and" in query) return query.and.every((q) => satisfies(q, held));
  return query.or.some((q) => satisfies(q, held));
}

export function describeQuery(query: PermissionQuery): string {
  if (typeof query === "string") return JSON.stringify(query);
  if ("and" in query) return `all of [${query.and.map(describeQuery).join(", ")}]`;
  return `one of [${query.or.map(describeQuery).join(", ")}]`;
}

/** `or("*", "api.*.<action>", "api.<apiId>.<action>")`, the usual shape of an API-scoped check. */
export function apiPermission(apiId: string, ...actions: string[]): PermissionQuery {
  return { or: ["*", ...actions.flatMap((a) => [`api.*.${a}`, `api.${apiId}.${a}`])] };
}
