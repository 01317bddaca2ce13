/**
 * What keyhaven's v2 routes accept, checked on the CLI's side before a record is sent to
 * POST /v2/keyhaven.copyFromUnkey (or counted by --dry-run): a record outside the bounds is skipped with why, rather
 * than making its whole batch a 400.
 */
import { fmt } from "../import/import.progress.js";
import type { UnkeyIdentity, UnkeyKey, UnkeyRatelimit } from "../../unkey/unkey.schemas.js";

/*
 * What keyhaven's v2 routes accept (src/wire/v2: keys.createKey, identities.createIdentity and their shared schemas),
 * restated here rather than imported: this command loads no server code, and the writing half will check the same
 * bounds again on the server.
 */
const MAX_INT32 = 2_147_483_647;
const MAX_EXPIRES = 4_102_444_800_000; // 2100-01-01, V2_MAX_EXPIRES
const MAX_WINDOW_MS = 2_592_000_000; // 30 days
const ID = /^[a-zA-Z0-9_]{3,255}$/;
const EXTERNAL_ID = /^[a-zA-Z0-9_.-]{1,255}$/;
const PERMISSION_SLUG = /^[a-zA-Z0-9_:\-.*]{1,128}$/;
const MAX_IDENTITY_META_JSON = 1_000_000;

/** Why a key or an identity cannot be held as it is, field by field (names and bounds, never a value). */
function ratelimitProblems(field: string, limits: UnkeyRatelimit[] | undefined): string[] {
  if (!limits) return [];
  const out: string[] = [];
  if (limits.length > 50) out.push(`${field}: more than 50 rate limits`);
  limits.forEach((r, i) => {
    if (r.name.length < 3 || r.name.length > 128) out.push(`${field}[${i}].name: must be 3 to 128 characters`);
    if (r.limit < 1 || r.limit > MAX_INT32) out.push(`${field}[${i}].limit: must be 1 to ${MAX_INT32}`);
    if (r.duration < 1000 || r.duration > MAX_WINDOW_MS) out.push(`${field}[${i}].duration: must be 1000 to ${MAX_WINDOW_MS} ms`);
  });
  return out;
}

function metaProblems(field: string, meta: Record<string, unknown> | undefined, maxJson?: number): string[] {
  if (!meta) return [];
  const out: string[] = [];
  if (Object.keys(meta).length > 100) out.push(`${field}: more than 100 properties`);
  if (maxJson !== undefined && JSON.stringify(meta).length > maxJson) out.push(`${field}: larger than ${fmt(maxJson)} bytes as JSON`);
  return out;
}

export function identityProblems(identity: UnkeyIdentity, field = "identity"): string[] {
  const out: string[] = [];
  if (!ID.test(identity.id)) out.push(`${field}.id: not 3 to 255 letters, digits and underscores`);
  if (!EXTERNAL_ID.test(identity.externalId)) out.push(`${field}.externalId: not 1 to 255 letters, digits and _ . -`);
  out.push(...metaProblems(`${field}.meta`, identity.meta, MAX_IDENTITY_META_JSON));
  out.push(...ratelimitProblems(`${field}.ratelimits`, identity.ratelimits));
  return out;
}

export function keyProblems(key: UnkeyKey): string[] {
  const out: string[] = [];
  if (!ID.test(key.keyId)) out.push("keyId: not 3 to 255 letters, digits and underscores");
  if (key.name !== undefined && key.name.length > 255) out.push("name: longer than 255 characters");
  out.push(...metaProblems("meta", key.meta));
  if (key.expires !== undefined && (key.expires < 0 || key.expires > MAX_EXPIRES)) out.push("expires: after 2100-01-01");
  if (key.roles) {
    if (key.roles.length > 100) out.push("roles: more than 100");
    if (key.roles.some((r) => r.length < 1 || r.length > 128)) out.push("roles: a name not 1 to 128 characters");
  }
  if (key.permissions) {
    if (key.permissions.length > 1000) out.push("permissions: more than 1000");
    if (key.permissions.some((p) => !PERMISSION_SLUG.test(p))) out.push("permissions: a slug not 1 to 128 letters, digits and _ : - . *");
  }
  const credits = key.credits;
  if (credits) {
    if (credits.remaining !== null && (credits.remaining < 0 || credits.remaining > MAX_INT32)) {
      out.push(`credits.remaining: must be 0 to ${MAX_INT32}`);
    }
    const refill = credits.refill;
    if (refill) {
      if (refill.amount < 1 || refill.amount > MAX_INT32) out.push(`credits.refill.amount: must be 1 to ${MAX_INT32}`);
      if (refill.interval === "monthly" && (refill.refillDay === undefined || refill.refillDay < 1 || refill.refillDay > 31)) {
        out.push("credits.refill.refillDay: a monthly refill needs a day from 1 to 31");
      }
    }
  }
  out.push(...ratelimitProblems("ratelimits", key.ratelimits));
  if (key.identity) out.push(...identityProblems(key.identity));
  return out;
}
