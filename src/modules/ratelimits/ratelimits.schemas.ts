import { z } from "zod";
import { ApiError } from "../../errors.js";
import { MAX_INT32 } from "../keys/keys.schemas.js";
import type { NamespaceSelector } from "./ratelimits.repository.js";

/** Namespace names and identifiers: up to 512 characters, the width upstream stored them in. */
export const MAX_NAME = 512;

/** A window in milliseconds: at least one second, as for key rate limits. */
export const durationSchema = z.int().min(1000).max(Number.MAX_SAFE_INTEGER);

export const limitSchema = (min: number) => z.int().min(min).max(MAX_INT32);

export const overrideOutput = z.object({
  id: z.string(),
  identifier: z.string(),
  limit: z.number(),
  duration: z.number(),
  async: z.boolean(),
});

/** v1's check, made before authentication: setOverride, getOverride, listOverrides and deleteOverride need one of them. */
export function assertNamespaceGiven(by: NamespaceSelector): void {
  if (by.namespaceId === undefined && by.namespaceName === undefined) {
    throw new ApiError("BAD_REQUEST", "You must provide a namespaceId or a namespaceName");
  }
}

export const namespaceLabel = (by: NamespaceSelector) => by.namespaceId ?? by.namespaceName ?? "";
