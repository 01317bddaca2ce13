import { createApi } from "./modules/apis/v1.apis.createApi.js";
import { deleteApi } from "./modules/apis/v1.apis.deleteApi.js";
import { deleteKeys } from "./modules/apis/v1.apis.deleteKeys.js";
import { getApi } from "./modules/apis/v1.apis.getApi.js";
import { listKeys } from "./modules/apis/v1.apis.listKeys.js";
import { getKey } from "./modules/keys/v1.keys.getKey.js";
import { updateKey } from "./modules/keys/v1.keys.updateKey.js";
import { createKey } from "./modules/keys/v1.keys.createKey.js";
import { deleteKey } from "./modules/keys/v1.keys.deleteKey.js";
import { updateRemaining } from "./modules/keys/v1.keys.updateRemaining.js";
import { verifyKey } from "./modules/keys/v1.keys.verifyKey.js";
import { whoami } from "./modules/keys/v1.keys.whoami.js";
import { liveness } from "./modules/liveness/v1.liveness.js";
import { createKeys } from "./modules/migrations/v1.migrations.createKeys.js";
import { createPermission } from "./modules/permissions/v1.permissions.createPermission.js";
import { createRole } from "./modules/permissions/v1.permissions.createRole.js";
import { createRootKey } from "./modules/rootKeys/v1.rootKeys.createRootKey.js";
import { deleteRootKey } from "./modules/rootKeys/v1.rootKeys.deleteRootKey.js";
import { createWorkspace } from "./modules/workspaces/v1.workspaces.createWorkspace.js";
import { updateWorkspace } from "./modules/workspaces/v1.workspaces.updateWorkspace.js";
import type { Rpc } from "./rpc.js";

/** Every RPC keyhaven serves, by service: the table of contents of the API. */
export const rpcs: Rpc[] = [
  liveness,
  // apis
  createApi,
  getApi,
  deleteApi,
  deleteKeys,
  listKeys,
  // keys
  verifyKey,
  createKey,
  deleteKey,
  updateRemaining,
  updateKey,
  getKey,
  whoami,
  // migrations
  createKeys,
  // permissions
  createPermission,
  createRole,
  // operator routes (keyhaven extensions, admin token)
  createWorkspace,
  updateWorkspace,
  createRootKey,
  deleteRootKey,
] as Rpc[];
