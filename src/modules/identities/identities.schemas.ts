import { z } from "zod";
import { ApiError } from "../../errors.js";

export const ratelimitInput = z.object({
  name: z.string().min(1),
  limit: z.int().min(1),
  duration: z.int().min(1000),
});

export const ratelimitOutput = z.object({ name: z.string(), limit: z.number(), duration: z.number() });

export const meta = z.record(z.string(), z.unknown());

/** v1 refuses meta whose JSON encoding is longer than 64 000 characters. */
export function assertMetaSize(value: Record<string, unknown> | undefined): void {
  if (value === undefined) return;
  const size = JSON.stringify(value).length;
  if (size > 64_000) {
    throw new ApiError("BAD_REQUEST", `metadata is too large, it must be less than 64k characters when json encoded, got: ${size}`);
  }
}
