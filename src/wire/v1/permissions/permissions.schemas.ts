import { z } from "zod";
import { idInput } from "../inputBounds.js";

/** Permission names and slugs: 3 to 256 characters of letters, digits and `_ . : -`. */
export const identifier = z
  .string()
  .min(3)
  .max(256)
  .regex(/^[a-zA-Z0-9_.:-]*$/, "must contain only letters, digits and the characters _ . : -");

export const description = z.union([z.string().min(3).max(256), z.literal("")]);

/** A permission as the read routes show it: `description` only when it has one. */
export const permissionOutput = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  description: z.string().optional(),
});

/** A role as the read routes show it. */
export const roleOutput = z.object({ id: z.string(), name: z.string(), description: z.string().optional() });

export function toPermissionOutput(p: { id: string; name: string; slug: string; description: string | null }) {
  return { id: p.id, name: p.name, slug: p.slug, ...(p.description ? { description: p.description } : {}) };
}

export function toRoleOutput(r: { id: string; name: string; description: string | null }) {
  return { id: r.id, name: r.name, ...(r.description ? { description: r.description } : {}) };
}

/** The permissions of addPermissionsToRole / removePermissionsFromRole: each by id, or else by slug. */
export const permissionRefs = z
  .array(
    z
      .object({ id: idInput.optional(), slug: z.string().min(1).max(256).optional() })
      .refine((p) => p.id !== undefined || p.slug !== undefined, "provide either id or slug"),
  )
  .min(1)
  .max(1000);
