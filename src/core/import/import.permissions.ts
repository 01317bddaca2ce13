import type { PermissionQuery } from "../auth/permissions.query.js";

/**
 * What a root key needs to import keys into `apiId`, in both import routes and whatever the key's form (hash or
 * plaintext): `*`, or `create_key` (`api.*.` or `api.<apiId>.`). A plaintext is stored encrypted, but the caller
 * already holds the plaintext it sends, so storing it grants nothing more and asks nothing more (as upstream's own
 * tests import plaintext with `create_key` alone); reading it back is `decrypt_key`'s. v1's createKeys also took
 * `encrypt_key` alone (an OR), which created verifiable keys without `create_key`: keyhaven never does.
 */
export function importPermission(apiId: string): PermissionQuery {
  return { or: ["*", "api.*.create_key", `api.${apiId}.create_key`] };
}

/** The permissions `importPermission` asks for, in words, for the 403 of one key. */
export function describeImportPermission(apiId: string): string {
  return `one of the permissions "*", "api.*.create_key" or "api.${apiId}.create_key"`;
}
