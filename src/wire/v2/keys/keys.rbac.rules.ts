import type { KeyLinkRules } from "../../../core/rbac/rbac.keyLinks.js";

/**
 * Unkey v2's rules of connecting roles and permissions to a key (contract §2 rows 15–20, §15.4): update_key on the
 * key's API with the rbac permission, a set checked up front, every unknown name a 404 `namedNotFound`, creating by
 * create_permission's tuple or URN.
 */
export const V2_KEY_LINKS: KeyLinkRules = {
  permission: "updateKey",
  set: "checkUpFront",
  unknownNames: "namedNotFound",
  creating: "createGrant",
};
