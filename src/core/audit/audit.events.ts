/**
 * Every event the audit log records: Unkey's names where Unkey has one (its audit log's event names), keyhaven's own
 * for what Unkey lacks (workspaces and root keys as the operator makes them, imports, migrations, the encryption key).
 * docs/audit.md lists them with the routes that write each; test/audit.routes.test.ts holds every route to its events.
 */
export const AUDIT_EVENTS = [
  "workspace.create",
  "workspace.update",
  "rootKey.create",
  "rootKey.delete",
  "api.create",
  "api.update",
  "api.delete",
  "key.create",
  "key.update",
  "key.delete",
  "key.reroll",
  "key.adopt",
  "role.create",
  "role.delete",
  "permission.create",
  "permission.delete",
  "authorization.connect_role_and_key",
  "authorization.disconnect_role_and_key",
  "authorization.connect_permission_and_key",
  "authorization.disconnect_permission_and_key",
  "authorization.connect_role_and_permission",
  "authorization.disconnect_role_and_permission",
  "identity.create",
  "identity.update",
  "identity.delete",
  "ratelimit.set_override",
  "ratelimit.delete_override",
  "import.create_keys",
  "import.enqueue",
  "import.retry",
  "import.apply_batch",
  "import.from_unkey",
  "migration.create",
  "encryptionKey.rotate",
  "encryptionKey.reset",
  "console.sign_in",
  "console.sign_out",
  "key.reveal",
] as const;

export type AuditEvent = (typeof AUDIT_EVENTS)[number];
