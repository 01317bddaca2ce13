import type { PermissionQuery } from "../auth/permissions.query.js";

/**
 * What a root key needs to import keys into `apiId`, in both import routes and whatever the key's form: `*`, or
 * `create_key` (`api.*.` or `api.<apiId>.`), and `encrypt_key` too when a plaintext is stored (encrypted).
 * v1's createKeys took either one (an OR), so `encrypt_key` alone created verifiable keys; keyhaven asks, as
 * keys.createKey and migrations.enqueueKeys do, for `create_key` whenever a key is created.
 */
export function importPermission(apiId: string, withPlaintext: boolean): PermissionQuery {
  const createKey: PermissionQuery = { or: ["api.*.create_key", `api.${apiId}.create_key`] };
  const encryptKey: PermissionQuery = { or: ["api.*.encrypt_key", `api.${apiId}.encrypt_key`] };
  return { or: ["*", withPlaintext ? { and: [createKey, encryptKey] } : createKey] };
}

/** The permissions `importPermission` asks for, in words, for the 403 of one key. */
export function describeImportPermission(apiId: string, withPlaintext: boolean): string {
  const createKey = `"*", "api.*.create_key" or "api.${apiId}.create_key"`;
  if (!withPlaintext) return `one of the permissions ${createKey}`;
  return `"*", or one of "api.*.create_key" or "api.${apiId}.create_key" and one of "api.*.encrypt_key" or "api.${apiId}.encrypt_key" (it has a plaintext, stored encrypted)`;
}
