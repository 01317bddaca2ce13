import { getVerifications } from "./analytics/v2.analytics.getVerifications.js";
import { createApi } from "./apis/v2.apis.createApi.js";
import { deleteApi } from "./apis/v2.apis.deleteApi.js";
import { getApi } from "./apis/v2.apis.getApi.js";
import { listKeys } from "./apis/v2.apis.listKeys.js";
import { createIdentity } from "./identities/v2.identities.createIdentity.js";
import { deleteIdentity } from "./identities/v2.identities.deleteIdentity.js";
import { getIdentity } from "./identities/v2.identities.getIdentity.js";
import { listIdentities } from "./identities/v2.identities.listIdentities.js";
import { updateIdentity } from "./identities/v2.identities.updateIdentity.js";
import { addPermissions } from "./keys/v2.keys.addPermissions.js";
import { addRoles } from "./keys/v2.keys.addRoles.js";
import { deleteKey } from "./keys/v2.keys.deleteKey.js";
import { getKey } from "./keys/v2.keys.getKey.js";
import { removePermissions } from "./keys/v2.keys.removePermissions.js";
import { removeRoles } from "./keys/v2.keys.removeRoles.js";
import { setPermissions } from "./keys/v2.keys.setPermissions.js";
import { setRoles } from "./keys/v2.keys.setRoles.js";
import { updateCredits } from "./keys/v2.keys.updateCredits.js";
import { verifyKey } from "./keys/v2.keys.verifyKey.js";
import { createKey } from "./keys/v2.keys.createKey.js";
import { rerollKey } from "./keys/v2.keys.rerollKey.js";
import { updateKey } from "./keys/v2.keys.updateKey.js";
import { whoami } from "./keys/v2.keys.whoami.js";
import { copyFromUnkey } from "./keyhaven/v2.keyhaven.copyFromUnkey.js";
import { createMigration } from "./keyhaven/v2.keyhaven.createMigration.js";
import { getCopyStatus } from "./keyhaven/v2.keyhaven.getCopyStatus.js";
import { listPendingKeys } from "./keyhaven/v2.keyhaven.listPendingKeys.js";
import { listAuditLogs } from "./keyhaven/v2.keyhaven.listAuditLogs.js";
import { createWebhook } from "./keyhaven/v2.keyhaven.createWebhook.js";
import { getAlertThresholds } from "./keyhaven/v2.keyhaven.getAlertThresholds.js";
import { setAlertThresholds } from "./keyhaven/v2.keyhaven.setAlertThresholds.js";
import { deleteWebhook } from "./keyhaven/v2.keyhaven.deleteWebhook.js";
import { listWebhookDeliveries } from "./keyhaven/v2.keyhaven.listWebhookDeliveries.js";
import { listWebhooks } from "./keyhaven/v2.keyhaven.listWebhooks.js";
import { replayWebhookDelivery } from "./keyhaven/v2.keyhaven.replayWebhookDelivery.js";
import { updateWebhook } from "./keyhaven/v2.keyhaven.updateWebhook.js";
import { migrateKeys } from "./keys/v2.keys.migrateKeys.js";
import { liveness } from "./liveness/v2.liveness.js";
import { createPermission } from "./permissions/v2.permissions.createPermission.js";
import { deletePermission } from "./permissions/v2.permissions.deletePermission.js";
import { createRole } from "./permissions/v2.permissions.createRole.js";
import { deleteRole } from "./permissions/v2.permissions.deleteRole.js";
import { getPermission } from "./permissions/v2.permissions.getPermission.js";
import { getRole } from "./permissions/v2.permissions.getRole.js";
import { listPermissions } from "./permissions/v2.permissions.listPermissions.js";
import { listRoles } from "./permissions/v2.permissions.listRoles.js";
import { setRolePermissions } from "./permissions/v2.permissions.setRolePermissions.js";
import { deleteOverride } from "./ratelimit/v2.ratelimit.deleteOverride.js";
import { getOverride } from "./ratelimit/v2.ratelimit.getOverride.js";
import { limit } from "./ratelimit/v2.ratelimit.limit.js";
import { listOverrides } from "./ratelimit/v2.ratelimit.listOverrides.js";
import { multiLimit } from "./ratelimit/v2.ratelimit.multiLimit.js";
import { setOverride } from "./ratelimit/v2.ratelimit.setOverride.js";
import { createSession } from "./portal/v2.portal.createSession.js";
import { exchangeCode } from "./portal/v2.portal.exchangeCode.js";
import { listKeys as listPortalKeys } from "./portal/v2.portal.listKeys.js";
import { rerollKey as rerollPortalKey } from "./portal/v2.portal.rerollKey.js";
import { getVerifications as getPortalVerifications } from "./portal/v2.portal.getVerifications.js";
import { createPortal } from "./keyhaven/v2.keyhaven.createPortal.js";
import { getPortal } from "./keyhaven/v2.keyhaven.getPortal.js";
import { listPortals } from "./keyhaven/v2.keyhaven.listPortals.js";
import { updatePortal } from "./keyhaven/v2.keyhaven.updatePortal.js";
import { deletePortal } from "./keyhaven/v2.keyhaven.deletePortal.js";
import type { V2Rpc } from "./rpc.js";

/** Every v2 RPC keyhaven serves so far, by service (issue 14 adds the rest). */
export const v2Rpcs: V2Rpc[] = [
  liveness,
  // apis
  createApi,
  getApi,
  listKeys,
  deleteApi,
  // keys
  createKey,
  getKey,
  whoami,
  deleteKey,
  updateKey,
  updateCredits,
  verifyKey,
  addPermissions,
  removePermissions,
  setPermissions,
  addRoles,
  removeRoles,
  setRoles,
  rerollKey,
  migrateKeys,
  // identities
  createIdentity,
  getIdentity,
  listIdentities,
  updateIdentity,
  deleteIdentity,
  // permissions
  createPermission,
  getPermission,
  listPermissions,
  deletePermission,
  getRole,
  listRoles,
  deleteRole,
  createRole,
  setRolePermissions,
  // ratelimit
  limit,
  multiLimit,
  setOverride,
  getOverride,
  listOverrides,
  deleteOverride,
  // analytics
  getVerifications,
  // portal (customer portal sessions)
  createSession,
  exchangeCode,
  listPortalKeys,
  rerollPortalKey,
  getPortalVerifications,
  // keyhaven's extensions
  createMigration,
  listAuditLogs,
  copyFromUnkey,
  getCopyStatus,
  listPendingKeys,
  createWebhook,
  listWebhooks,
  updateWebhook,
  deleteWebhook,
  listWebhookDeliveries,
  replayWebhookDelivery,
  getAlertThresholds,
  setAlertThresholds,
  createPortal,
  getPortal,
  listPortals,
  updatePortal,
  deletePortal,
];
