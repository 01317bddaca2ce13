import { z } from "zod";

/** An id in a v2 request (contract §1.7): 8 to 255 letters, digits and underscores; its prefix is never checked. */
export const v2Id = z
  .string()
  .min(8)
  .max(255)
  .regex(/^[a-zA-Z0-9_]+$/, { error: "must hold only letters, digits and underscores" });
