import { z } from "zod";

/**
 * v1's request and response schemas of keys.addPermissions / removePermissions / setPermissions / addRoles /
 * removeRoles / setRoles. Their rules live in the core (src/core/rbac/rbac.keyLinks.ts).
 */

// keys.updateKey (v1.keys.updateKey.ts) still imports these from here.
import type { Wanted } from "../../../core/rbac/rbac.keyLinks.js";

// ---- Request schemas ----

const id = z.string().min(1).max(256);
const name = z.string().min(1).max(512);
const MAX_ENTRIES = 1000;

const named = { id: id.optional(), name: name.optional() };
const eitherIdOrName = (c: { id?: string; name?: string }) => c.id !== undefined || c.name !== undefined;

/** `{id?, name?, create?}` of addPermissions, addRoles and setRoles. */
export const connectionSchema = z
  .object({ ...named, create: z.boolean().optional() })
  .refine(eitherIdOrName, "provide either `id` or `name`");

/** `{id?, name?}` of removeRoles. */
export const disconnectionSchema = z.object(named).refine(eitherIdOrName, "provide either `id` or `name`");

const bySlug = (c: { id?: string; name?: string; slug?: string }) => c.id !== undefined || c.name !== undefined || c.slug !== undefined;

/** `{id?, name?, slug?, create?}` of setPermissions: `name` and `slug` both name the slug (`name` wins). */
export const permissionSlugSchema = z
  .object({ ...named, slug: name.optional(), create: z.boolean().optional() })
  .refine(bySlug, "provide one of `id`, `name` or `slug`")
  .transform((c): Wanted => ({ id: c.id, name: c.name ?? c.slug, create: c.create }));

/** `{id?, name?, slug?}` of removePermissions. */
export const permissionSlugRemovalSchema = z
  .object({ ...named, slug: name.optional() })
  .refine(bySlug, "provide one of `id`, `name` or `slug`")
  .transform((c): Wanted => ({ id: c.id, name: c.name ?? c.slug }));

export const entries = <T extends z.ZodType>(entry: T) => z.array(entry).min(1).max(MAX_ENTRIES);

export const connectedSchema = z.array(z.object({ id: z.string(), name: z.string() }));
