import { z } from "zod";

/** Permission names and slugs: 3 to 256 characters of letters, digits and `_ . : -`. */
export const identifier = z
  .string()
  .min(3)
  .max(256)
  .regex(/^[a-zA-Z0-9_.:-]*$/, "must contain only letters, digits and the characters _ . : -");

export const description = z.union([z.string().min(3).max(256), z.literal("")]);
