import { z } from "zod";
import { slugInput } from "../permissions/permissions.schemas.js";

/** The permissions a key RBAC route names (contract §4.8): slugs, created when missing (where allowed). */
export const permissionSlugsInput = (min: number) =>
  z
    .array(slugInput)
    .min(min)
    .max(1000)
    .describe("Permission slugs; one the workspace lacks is created (needs create_permission), except to remove.");

/** The roles a key RBAC route names (contract §4.11): by name, never created. */
export const roleNamesInput = (min: number) =>
  z.array(z.string().min(1).max(128)).min(min).max(100).describe("Role names; a name the workspace lacks is a 404.");
