/**
 * Every mutating route of every HTTP surface (v1, its operator routes, v2): the routes that accept an
 * Idempotency-Key (issue 35 §3). Not verification (keys.verifyKey) nor rate limiting (ratelimit(s).limit,
 * multiLimit): they count, they change nothing a retry could apply twice. test/writes.test.ts fails when a route of
 * the registries whose name reads as a write is missing here, so a new write cannot be forgotten.
 */
export const MUTATING_ROUTES: ReadonlySet<string> = new Set([
  // v1
  "/v1/apis.createApi",
  "/v1/apis.deleteApi",
  "/v1/apis.deleteKeys",
  "/v1/apis.updateApi",
  "/v1/keys.createKey",
  "/v1/keys.deleteKey",
  "/v1/keys.updateRemaining",
  "/v1/keys.updateKey",
  "/v1/keys.addPermissions",
  "/v1/keys.removePermissions",
  "/v1/keys.setPermissions",
  "/v1/keys.addRoles",
  "/v1/keys.removeRoles",
  "/v1/keys.setRoles",
  "/v1/migrations.createKeys",
  "/v1/migrations.enqueueKeys",
  "/v1/migrations.retryMigration",
  "/v1/permissions.createPermission",
  "/v1/permissions.createRole",
  "/v1/permissions.deletePermission",
  "/v1/permissions.deleteRole",
  "/v1/permissions.addPermissionsToRole",
  "/v1/permissions.removePermissionsFromRole",
  "/v1/identities.createIdentity",
  "/v1/identities.updateIdentity",
  "/v1/identities.deleteIdentity",
  "/v1/ratelimits.setOverride",
  "/v1/ratelimits.deleteOverride",
  // v1 operator routes (KEYHAVEN_ADMIN_TOKEN)
  "/v1/workspaces.createWorkspace",
  "/v1/workspaces.updateWorkspace",
  "/v1/rootKeys.createRootKey",
  "/v1/rootKeys.deleteRootKey",
  // v2
  "/v2/apis.createApi",
  "/v2/apis.deleteApi",
  "/v2/keys.createKey",
  "/v2/keys.deleteKey",
  "/v2/keys.updateKey",
  "/v2/keys.updateCredits",
  "/v2/keys.addPermissions",
  "/v2/keys.removePermissions",
  "/v2/keys.setPermissions",
  "/v2/keys.addRoles",
  "/v2/keys.removeRoles",
  "/v2/keys.setRoles",
  "/v2/keys.rerollKey",
  "/v2/keys.migrateKeys",
  "/v2/identities.createIdentity",
  "/v2/identities.updateIdentity",
  "/v2/identities.deleteIdentity",
  "/v2/permissions.createPermission",
  "/v2/permissions.deletePermission",
  "/v2/permissions.createRole",
  "/v2/permissions.deleteRole",
  "/v2/permissions.setRolePermissions",
  "/v2/ratelimit.setOverride",
  "/v2/ratelimit.deleteOverride",
  "/v2/keyhaven.createMigration",
  "/v2/keyhaven.copyFromUnkey",
  "/v2/keyhaven.createWebhook",
  "/v2/keyhaven.updateWebhook",
  "/v2/keyhaven.deleteWebhook",
  "/v2/keyhaven.replayWebhookDelivery",
  "/v2/keyhaven.setAlertThresholds",
]);

/** Whether a request to `path` may change something (and so accepts an Idempotency-Key). */
export function isMutatingRoute(path: string): boolean {
  return MUTATING_ROUTES.has(path);
}
