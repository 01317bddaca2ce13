import { createApi } from "./modules/apis/v1.apis.createApi.js";
import { deleteApi } from "./modules/apis/v1.apis.deleteApi.js";
import { deleteKeys } from "./modules/apis/v1.apis.deleteKeys.js";
import { getApi } from "./modules/apis/v1.apis.getApi.js";
import { listKeys } from "./modules/apis/v1.apis.listKeys.js";
import { updateApi } from "./modules/apis/v1.apis.updateApi.js";
import { getKey } from "./modules/keys/v1.keys.getKey.js";
import { updateKey } from "./modules/keys/v1.keys.updateKey.js";
import { createKey } from "./modules/keys/v1.keys.createKey.js";
import { deleteKey } from "./modules/keys/v1.keys.deleteKey.js";
import { updateRemaining } from "./modules/keys/v1.keys.updateRemaining.js";
import { verifyKey } from "./modules/keys/v1.keys.verifyKey.js";
import { whoami } from "./modules/keys/v1.keys.whoami.js";
import { addPermissions } from "./modules/keys/v1.keys.addPermissions.js";
import { removePermissions } from "./modules/keys/v1.keys.removePermissions.js";
import { setPermissions } from "./modules/keys/v1.keys.setPermissions.js";
import { addRoles } from "./modules/keys/v1.keys.addRoles.js";
import { removeRoles } from "./modules/keys/v1.keys.removeRoles.js";
import { setRoles } from "./modules/keys/v1.keys.setRoles.js";
import { liveness } from "./modules/liveness/v1.liveness.js";
import { readiness } from "./modules/liveness/v1.readiness.js";
import { createKeys } from "./modules/migrations/v1.migrations.createKeys.js";
import { enqueueKeys } from "./modules/migrations/v1.migrations.enqueueKeys.js";
import { getMigration } from "./modules/migrations/v1.migrations.getMigration.js";
import { retryMigration } from "./modules/migrations/v1.migrations.retryMigration.js";
import { getVerifications as getKeyVerifications } from "./modules/keys/v1.keys.getVerifications.js";
import { getVerifications as getAnalyticsVerifications } from "./modules/analytics/v1.analytics.getVerifications.js";
import { createPermission } from "./modules/permissions/v1.permissions.createPermission.js";
import { createRole } from "./modules/permissions/v1.permissions.createRole.js";
import { getPermission } from "./modules/permissions/v1.permissions.getPermission.js";
import { listPermissions } from "./modules/permissions/v1.permissions.listPermissions.js";
import { deletePermission } from "./modules/permissions/v1.permissions.deletePermission.js";
import { getRole } from "./modules/permissions/v1.permissions.getRole.js";
import { listRoles } from "./modules/permissions/v1.permissions.listRoles.js";
import { deleteRole } from "./modules/permissions/v1.permissions.deleteRole.js";
import { addPermissionsToRole } from "./modules/permissions/v1.permissions.addPermissionsToRole.js";
import { removePermissionsFromRole } from "./modules/permissions/v1.permissions.removePermissionsFromRole.js";
import { createRootKey } from "./modules/rootKeys/v1.rootKeys.createRootKey.js";
import { deleteRootKey } from "./modules/rootKeys/v1.rootKeys.deleteRootKey.js";
import { createWorkspace } from "./modules/workspaces/v1.workspaces.createWorkspace.js";
import { updateWorkspace } from "./modules/workspaces/v1.workspaces.updateWorkspace.js";
import { createIdentity } from "./modules/identities/v1.identities.createIdentity.js";
import { getIdentity } from "./modules/identities/v1.identities.getIdentity.js";
import { listIdentities } from "./modules/identities/v1.identities.listIdentities.js";
import { updateIdentity } from "./modules/identities/v1.identities.updateIdentity.js";
import { deleteIdentity } from "./modules/identities/v1.identities.deleteIdentity.js";
import { limit } from "./modules/ratelimits/v1.ratelimits.limit.js";
import { setOverride } from "./modules/ratelimits/v1.ratelimits.setOverride.js";
import { getOverride } from "./modules/ratelimits/v1.ratelimits.getOverride.js";
import { listOverrides } from "./modules/ratelimits/v1.ratelimits.listOverrides.js";
import { deleteOverride } from "./modules/ratelimits/v1.ratelimits.deleteOverride.js";
import { listNamespaces } from "./modules/ratelimits/v1.ratelimits.listNamespaces.js";
import type { Rpc } from "./rpc.js";

/** Every RPC keyhaven serves, by service: the table of contents of the API. */
export const rpcs: Rpc[] = [
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
  // operator routes (keyhaven extensions, admin token)
  createWorkspace,
  updateWorkspace,
  createRootKey,
  deleteRootKey,
  retryMigration,
] as Rpc[];
