-- Root keys and standalone rate limit lookups join the epoch of migration `verification_epoch`: every replica keeps
-- authenticated root keys, and each namespace's override for an identifier, in memory only while the epoch has not
-- moved since they were read. New root keys and new namespaces change nothing already cached (absent rows are never
-- cached); a new override can change the answer for identifiers already cached, so inserts of overrides count.
CREATE TRIGGER root_keys_bump_epoch AFTER UPDATE OR DELETE ON root_keys FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER ratelimit_namespaces_bump_epoch AFTER UPDATE OR DELETE ON ratelimit_namespaces FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER ratelimit_overrides_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON ratelimit_overrides FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
-- The triggers of migration verification_epoch that were statement-level become row-level: a statement-level
-- trigger fires even when its statement changes no row, so a refused request (a delete or update of an id that does
-- not exist) moved the epoch and emptied every replica's caches. The bump still happens once per transaction
-- (keyhaven_bump_epoch checks its transaction-local flag first).
DROP TRIGGER keys_bump_epoch_on_delete ON keys;
--> statement-breakpoint
CREATE TRIGGER keys_bump_epoch_on_delete AFTER DELETE ON keys FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER workspaces_bump_epoch ON workspaces;
--> statement-breakpoint
CREATE TRIGGER workspaces_bump_epoch AFTER UPDATE OR DELETE ON workspaces FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER apis_bump_epoch ON apis;
--> statement-breakpoint
CREATE TRIGGER apis_bump_epoch AFTER UPDATE OR DELETE ON apis FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER identities_bump_epoch ON identities;
--> statement-breakpoint
CREATE TRIGGER identities_bump_epoch AFTER UPDATE OR DELETE ON identities FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER permissions_bump_epoch ON permissions;
--> statement-breakpoint
CREATE TRIGGER permissions_bump_epoch AFTER UPDATE OR DELETE ON permissions FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER roles_bump_epoch ON roles;
--> statement-breakpoint
CREATE TRIGGER roles_bump_epoch AFTER UPDATE OR DELETE ON roles FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER keys_roles_bump_epoch ON keys_roles;
--> statement-breakpoint
CREATE TRIGGER keys_roles_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON keys_roles FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER keys_permissions_bump_epoch ON keys_permissions;
--> statement-breakpoint
CREATE TRIGGER keys_permissions_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON keys_permissions FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER roles_permissions_bump_epoch ON roles_permissions;
--> statement-breakpoint
CREATE TRIGGER roles_permissions_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON roles_permissions FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
DROP TRIGGER ratelimits_bump_epoch ON ratelimits;
--> statement-breakpoint
CREATE TRIGGER ratelimits_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON ratelimits FOR EACH ROW EXECUTE FUNCTION keyhaven_bump_epoch();
