import { listRootKeys } from "./rootKeys/v1.rootKeys.listRootKeys.js";
import { listWorkspaces } from "./workspaces/v1.workspaces.listWorkspaces.js";
import { createApi } from "./apis/v1.apis.createApi.js";
import { deleteApi } from "./apis/v1.apis.deleteApi.js";
import { deleteKeys } from "./apis/v1.apis.deleteKeys.js";
import { getApi } from "./apis/v1.apis.getApi.js";
import { listKeys } from "./apis/v1.apis.listKeys.js";
import { updateApi } from "./apis/v1.apis.updateApi.js";
import { getKey } from "./keys/v1.keys.getKey.js";
import { updateKey } from "./keys/v1.keys.updateKey.js";
import { createKey } from "./keys/v1.keys.createKey.js";
import { deleteKey } from "./keys/v1.keys.deleteKey.js";
import { updateRemaining } from "./keys/v1.keys.updateRemaining.js";
import { verifyKey } from "./keys/v1.keys.verifyKey.js";
import { whoami } from "./keys/v1.keys.whoami.js";
import { addPermissions } from "./keys/v1.keys.addPermissions.js";
import { removePermissions } from "./keys/v1.keys.removePermissions.js";
import { setPermissions } from "./keys/v1.keys.setPermissions.js";
import { addRoles } from "./keys/v1.keys.addRoles.js";
import { removeRoles } from "./keys/v1.keys.removeRoles.js";
import { setRoles } from "./keys/v1.keys.setRoles.js";
import { liveness } from "./liveness/v1.liveness.js";
import { readiness } from "./liveness/v1.readiness.js";
import { createKeys } from "./migrations/v1.migrations.createKeys.js";
import { enqueueKeys } from "./migrations/v1.migrations.enqueueKeys.js";
import { getMigration } from "./migrations/v1.migrations.getMigration.js";
import { retryMigration } from "./migrations/v1.migrations.retryMigration.js";
import { getVerifications as getKeyVerifications } from "./keys/v1.keys.getVerifications.js";
import { getVerifications as getAnalyticsVerifications } from "./analytics/v1.analytics.getVerifications.js";
import { createPermission } from "./permissions/v1.permissions.createPermission.js";
import { createRole } from "./permissions/v1.permissions.createRole.js";
import { getPermission } from "./permissions/v1.permissions.getPermission.js";
import { listPermissions } from "./permissions/v1.permissions.listPermissions.js";
import { deletePermission } from "./permissions/v1.permissions.deletePermission.js";
import { getRole } from "./permissions/v1.permissions.getRole.js";
import { listRoles } from "./permissions/v1.permissions.listRoles.js";
import { deleteRole } from "./permissions/v1.permissions.deleteRole.js";
import { addPermissionsToRole } from "./permissions/v1.permissions.addPermissionsToRole.js";
import { removePermissionsFromRole } from "./permissions/v1.permissions.removePermissionsFromRole.js";
import { createRootKey } from "./rootKeys/v1.rootKeys.createRootKey.js";
import { deleteRootKey } from "./rootKeys/v1.rootKeys.deleteRootKey.js";
import { createWorkspace } from "./workspaces/v1.workspaces.createWorkspace.js";
import { updateWorkspace } from "./workspaces/v1.workspaces.updateWorkspace.js";
import { createIdentity } from "./identities/v1.identities.createIdentity.js";
import { getIdentity } from "./identities/v1.identities.getIdentity.js";
import { listIdentities } from "./identities/v1.identities.listIdentities.js";
import { updateIdentity } from "./identities/v1.identities.updateIdentity.js";
import { deleteIdentity } from "./identities/v1.identities.deleteIdentity.js";
import { limit } from "./ratelimits/v1.ratelimits.limit.js";
import { setOverride } from "./ratelimits/v1.ratelimits.setOverride.js";
import { getOverride } from "./ratelimits/v1.ratelimits.getOverride.js";
import { listOverrides } from "./ratelimits/v1.ratelimits.listOverrides.js";
import { deleteOverride } from "./ratelimits/v1.ratelimits.deleteOverride.js";
import { listNamespaces } from "./ratelimits/v1.ratelimits.listNamespaces.js";
import type { Rpc } from "./rpc.js";

/** The v1 surface's own RPCs (Unkey v1's and keyhaven's extensions to it, root-key routes), by service. */
export const v1OwnRpcs: Rpc[] = [
  liveness,
  readiness,
  // apis
  createApi,
  getApi,
  deleteApi,
  deleteKeys,
  listKeys,
  // apis: keyhaven extension (v1 set the IP allow-list from its dashboard)
  updateApi,
  // keys
  verifyKey,
  createKey,
  deleteKey,
  updateRemaining,
  updateKey,
  getKey,
  whoami,
  addPermissions,
  removePermissions,
  setPermissions,
  addRoles,
  removeRoles,
  setRoles,
  getKeyVerifications,
  // migrations
  createKeys,
  enqueueKeys,
  // migrations: keyhaven extension (the results of enqueueKeys)
  getMigration,
  // analytics
  getAnalyticsVerifications,
  // permissions
  createPermission,
  createRole,
  getPermission,
  listPermissions,
  deletePermission,
  getRole,
  listRoles,
  deleteRole,
  // permissions: keyhaven extensions (v1 did this only from its dashboard)
  addPermissionsToRole,
  removePermissionsFromRole,
  // identities
  createIdentity,
  getIdentity,
  listIdentities,
  updateIdentity,
  deleteIdentity,
  // ratelimits (standalone)
  limit,
  setOverride,
  getOverride,
  listOverrides,
  deleteOverride,
  // ratelimits: keyhaven extension (the namespaces' ids, which the override routes accept)
  listNamespaces,
] as Rpc[];

/**
 * The operator surface's RPCs (keyhaven's own, KEYHAVEN_ADMIN_TOKEN): served under `/v1` in v1's envelope, by their
 * own plugin (operator.surface.ts); the only routes the admin token authenticates on its own.
 */
export const operatorRpcs: Rpc[] = [
  createWorkspace,
  updateWorkspace,
  listWorkspaces,
  createRootKey,
  deleteRootKey,
  listRootKeys,
  retryMigration,
] as Rpc[];

/** Every RPC served under `/v1`, the operator's included: the table of contents of the API. */
export const rpcs: Rpc[] = [...v1OwnRpcs, ...operatorRpcs];
