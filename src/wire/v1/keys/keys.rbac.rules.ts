import type { KeyLinkRules } from "../../../core/rbac/rbac.keyLinks.js";

/**
 * Unkey v1's rules of connecting roles and permissions to a key: its rbac permission alone, a set checked by what it
 * changes, an unknown name not found (ignored on removal), creating needs create_x (contract §4.8–§4.13).
 */
export const V1_KEY_LINKS: KeyLinkRules = {
  permission: "rbac",
  set: "checkEachChange",
  unknownNames: "perOperation",
  creating: "rbacCreate",
};
