import { z } from "zod";

/** A permission's slug as v2 takes it (contract §8.1). */
export const slugInput = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[a-zA-Z0-9_:\-.*]+$/, { error: "must hold only letters, digits and _ : - . *" });

export const permissionOutput = z.object({
  id: z.string().describe("The permission's id (`perm_…`)."),
  name: z.string(),
  slug: z.string().describe("What keys and root keys hold, and verification queries name."),
  description: z.string().optional(),
});

export const roleOutput = z.object({
  id: z.string().describe("The role's id (`role_…`)."),
  name: z.string(),
  description: z.string().optional(),
  permissions: z.array(permissionOutput).optional().describe("The role's permissions; absent when it has none."),
});

type PermissionRow = { id: string; name: string; slug: string; description: string | null };

/** A permission as v2 shows it: an empty description is left out. */
export const permissionData = (p: PermissionRow) => ({
  id: p.id,
  name: p.name,
  slug: p.slug,
  ...(p.description && { description: p.description }),
});

/** A role as v2 shows it: its permissions only when it has some. */
export const roleData = (r: { id: string; name: string; description: string | null; permissions: PermissionRow[] }) => ({
  id: r.id,
  name: r.name,
  ...(r.description && { description: r.description }),
  ...(r.permissions.length > 0 && { permissions: r.permissions.map(permissionData) }),
});
