-- Root keys and standalone rate limit lookups join the epoch of migration `verification_epoch`: every replica keeps
-- authenticated root keys, and each namespace's override for an identifier, in memory only while the epoch has not
-- moved since they were read. New root keys and new namespaces change nothing already cached (absent rows are never
-- cached); a new override can change the answer for identifiers already cached, so inserts of overrides count.
CREATE TRIGGER root_keys_bump_epoch AFTER UPDATE OR DELETE ON root_keys FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER ratelimit_namespaces_bump_epoch AFTER UPDATE OR DELETE ON ratelimit_namespaces FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
--> statement-breakpoint
CREATE TRIGGER ratelimit_overrides_bump_epoch AFTER INSERT OR UPDATE OR DELETE ON ratelimit_overrides FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_bump_epoch();
