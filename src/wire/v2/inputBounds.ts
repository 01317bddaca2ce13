import { z } from "zod";

/** An id in a v2 request (contract §1.7): `min` to 255 letters, digits and underscores; its prefix is never checked. */
const idOf = (min: number) =>
  z
    .string()
    .min(min)
    .max(255)
    .regex(/^[a-zA-Z0-9_]+$/, { error: "must hold only letters, digits and underscores" });

/** A key's or an API's id as most v2 routes take it: at least 3 characters, so a short unknown id is a 404. */
export const v2Id = idOf(3);

/** An API's id as apis.getApi and apis.deleteApi take it: at least 8 characters (upstream's schema for them). */
export const v2ApiIdOfApis = idOf(8);

/**
 * A name of something to look up and nothing else (apis.listKeys' apiId, identities' `identity`): upstream bounds
 * neither its length nor its characters, so whatever names nothing stored is a 404, found without asking the store
 * (src/storage/lookupText.ts); the body limit bounds it.
 */
export const v2LookupRef = z.string().min(1);
