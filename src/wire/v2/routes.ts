import { createApi } from "./apis/v2.apis.createApi.js";
import { deleteApi } from "./apis/v2.apis.deleteApi.js";
import { getApi } from "./apis/v2.apis.getApi.js";
import { listKeys } from "./apis/v2.apis.listKeys.js";
import { createIdentity } from "./identities/v2.identities.createIdentity.js";
import { deleteIdentity } from "./identities/v2.identities.deleteIdentity.js";
import { getIdentity } from "./identities/v2.identities.getIdentity.js";
import { listIdentities } from "./identities/v2.identities.listIdentities.js";
import { updateIdentity } from "./identities/v2.identities.updateIdentity.js";
import { deleteKey } from "./keys/v2.keys.deleteKey.js";
import { getKey } from "./keys/v2.keys.getKey.js";
import { updateCredits } from "./keys/v2.keys.updateCredits.js";
import { whoami } from "./keys/v2.keys.whoami.js";
import { createMigration } from "./keyhaven/v2.keyhaven.createMigration.js";
import { migrateKeys } from "./keys/v2.keys.migrateKeys.js";
import { liveness } from "./liveness/v2.liveness.js";
import { createPermission } from "./permissions/v2.permissions.createPermission.js";
import { deletePermission } from "./permissions/v2.permissions.deletePermission.js";
import { deleteRole } from "./permissions/v2.permissions.deleteRole.js";
import { getPermission } from "./permissions/v2.permissions.getPermission.js";
import { getRole } from "./permissions/v2.permissions.getRole.js";
import { listPermissions } from "./permissions/v2.permissions.listPermissions.js";
import { listRoles } from "./permissions/v2.permissions.listRoles.js";
import { deleteOverride } from "./ratelimit/v2.ratelimit.deleteOverride.js";
import { getOverride } from "./ratelimit/v2.ratelimit.getOverride.js";
import { limit } from "./ratelimit/v2.ratelimit.limit.js";
import { listOverrides } from "./ratelimit/v2.ratelimit.listOverrides.js";
import { setOverride } from "./ratelimit/v2.ratelimit.setOverride.js";
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
  getKey,
  whoami,
  deleteKey,
  updateCredits,
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
  // ratelimit
  limit,
  setOverride,
  getOverride,
  listOverrides,
  deleteOverride,
  // keyhaven's extensions
  createMigration,
];
