CREATE TABLE "alert_thresholds" (
	"target_id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"api_id" text NOT NULL,
	"key_id" text,
	"credits_low_percent" smallint,
	"credits_low_remaining" integer,
	"expiring_within_ms" bigint,
	"updated_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "key_alerts" (
	"key_id" text NOT NULL,
	"kind" text NOT NULL,
	"workspace_id" text NOT NULL,
	"since_m" bigint NOT NULL,
	"until_m" bigint,
	CONSTRAINT "key_alerts_key_id_kind_pk" PRIMARY KEY("key_id","kind")
);
--> statement-breakpoint
ALTER TABLE "keys" ADD COLUMN "credits_start" integer;--> statement-breakpoint
ALTER TABLE "alert_thresholds" ADD CONSTRAINT "alert_thresholds_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_thresholds" ADD CONSTRAINT "alert_thresholds_api_id_apis_id_fk" FOREIGN KEY ("api_id") REFERENCES "public"."apis"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_thresholds" ADD CONSTRAINT "alert_thresholds_key_id_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "key_alerts" ADD CONSTRAINT "key_alerts_key_id_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "alert_thresholds_workspace_idx" ON "alert_thresholds" USING btree ("workspace_id");--> statement-breakpoint
CREATE INDEX "key_alerts_kind_idx" ON "key_alerts" USING btree ("kind","until_m");--> statement-breakpoint
-- Threshold events (issue 38 §3, docs/webhooks.md): key.credits.low, key.credits.exhausted, key.expiring, key.expired
-- and their `.resolved` counterparts are decided here, by the statements that change keys (the spends of verification,
-- refills, updates, inserts) through triggers, so that an event is written to the webhook outbox in the same
-- transaction as the change that causes it: none is lost or invented, and a key's row lock orders its crossings (each
-- sends one event). key.ratelimited (core/webhooks webhooks.alerts.ts) and the expiry scan use the same functions.
--
-- The starting credits of a key (the base of a percentage threshold when it has no refill): its remaining uses when
-- they first change (so as created), or when they are raised (an update, an increment, a refill). The WHEN clause
-- keeps spends off plpgsql: a spend of a key that has its starting credits runs no function.
CREATE OR REPLACE FUNCTION keyhaven_credits_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.remaining_requests IS NULL THEN
    NEW.credits_start := NULL;
  ELSIF OLD.remaining_requests IS NULL OR NEW.remaining_requests > OLD.remaining_requests THEN
    NEW.credits_start := NEW.remaining_requests;
  ELSIF NEW.credits_start IS NULL THEN
    NEW.credits_start := OLD.remaining_requests;
  END IF;
  RETURN NEW;
END $$;--> statement-breakpoint
CREATE TRIGGER keys_credits_start BEFORE UPDATE OF remaining_requests ON keys FOR EACH ROW
  WHEN (NEW.remaining_requests IS DISTINCT FROM OLD.remaining_requests
    AND (OLD.credits_start IS NULL OR NEW.remaining_requests IS NULL OR NEW.remaining_requests > OLD.remaining_requests))
  EXECUTE FUNCTION keyhaven_credits_start();--> statement-breakpoint
-- The events a threshold sends (what the triggers' first probe looks for among the endpoints' subscriptions).
CREATE OR REPLACE FUNCTION keyhaven_threshold_events() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['key.credits.low', 'key.credits.low.resolved', 'key.credits.exhausted', 'key.credits.exhausted.resolved',
    'key.expiring', 'key.expiring.resolved', 'key.expired', 'key.expired.resolved']
$$;--> statement-breakpoint
-- The remaining uses below which a key is low (null: never): the key's own threshold, else its API's, else 10 % (the
-- default, core/webhooks webhooks.alerts.ts DEFAULT_CREDITS_LOW_PERCENT); an absolute number as it is, a
-- percentage of the refill amount, else of the starting credits, rounded up; a percentage of 0 is never.
CREATE OR REPLACE FUNCTION keyhaven_credits_low_threshold(p_key keys) RETURNS integer LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT CASE
    WHEN s.r IS NOT NULL THEN s.r
    WHEN s.p = 0 THEN NULL
    ELSE ceil(coalesce(p_key.refill_amount, p_key.credits_start, p_key.remaining_requests)::numeric * s.p / 100)::integer
  END
  FROM (
    SELECT r, p FROM (
      SELECT t.credits_low_remaining AS r, t.credits_low_percent::integer AS p, 0 AS o FROM alert_thresholds t
        WHERE t.target_id = p_key.id AND (t.credits_low_remaining IS NOT NULL OR t.credits_low_percent IS NOT NULL)
      UNION ALL
      SELECT t.credits_low_remaining, t.credits_low_percent::integer, 1 FROM alert_thresholds t
        WHERE t.target_id = p_key.api_id AND (t.credits_low_remaining IS NOT NULL OR t.credits_low_percent IS NOT NULL)
      UNION ALL
      SELECT NULL, 10, 2
    ) c ORDER BY o LIMIT 1
  ) s);
END $$;--> statement-breakpoint
-- How long before its expiry a key is expiring (0: never): the key's own setting, else its API's, else 7 days (the
-- default, webhooks.alerts.ts DEFAULT_EXPIRING_WITHIN_MS).
CREATE OR REPLACE FUNCTION keyhaven_expiring_within(p_key_id text, p_api_id text) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce(
    (SELECT t.expiring_within_ms FROM alert_thresholds t WHERE t.target_id = p_key_id),
    (SELECT t.expiring_within_ms FROM alert_thresholds t WHERE t.target_id = p_api_id),
    604800000));
END $$;--> statement-breakpoint
-- What a key's event says of it (`data`): who and what, never its hash, its meta or anything secret.
CREATE OR REPLACE FUNCTION keyhaven_key_event_data(p_key keys, p_event text, p_extra jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object(
    'keyId', p_key.id,
    'apiId', p_key.api_id,
    'workspaceId', p_key.workspace_id,
    'name', p_key.name,
    'identityId', p_key.identity_id,
    'externalId', coalesce((SELECT i.external_id FROM identities i WHERE i.id = p_key.identity_id), p_key.owner_id),
    'remaining', p_key.remaining_requests,
    'refillAmount', p_key.refill_amount,
    'threshold', CASE WHEN p_event LIKE 'key.credits.low%' THEN keyhaven_credits_low_threshold(p_key) END,
    'expires', floor(extract(epoch FROM p_key.expires) * 1000)::bigint,
    'expiringWithinMs', CASE WHEN p_event LIKE 'key.expiring%' THEN keyhaven_expiring_within(p_key.id, p_key.api_id) END
  )) || p_extra
$$;--> statement-breakpoint
-- Writes one delivery of the event per enabled endpoint of the workspace subscribed to it (the payload Standard
-- Webhooks' {type, timestamp, data}, as the audit log's outbox trigger writes); answers how many.
CREATE OR REPLACE FUNCTION keyhaven_enqueue_event(p_workspace_id text, p_event text, p_at_m bigint, p_data jsonb)
RETURNS integer LANGUAGE sql VOLATILE AS $$
  WITH written AS (
    INSERT INTO webhook_deliveries (id, workspace_id, endpoint_id, event, payload, next_attempt_at_m, created_at_m, updated_at_m)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), p_workspace_id, e.id, p_event,
      jsonb_build_object(
        'type', p_event,
        'timestamp', to_char(to_timestamp(p_at_m / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'data', p_data),
      p_at_m, p_at_m, p_at_m
    FROM webhook_endpoints e
    WHERE e.workspace_id = p_workspace_id AND e.enabled AND p_event = ANY (e.events)
    RETURNING 1)
  SELECT count(*)::integer FROM written
$$;--> statement-breakpoint
-- Applies changes of keys to their alerts at `p_now_m`: each alert of a changed aspect (credits: low, exhausted;
-- expiry: expiring, expired) that holds now and was not recorded is recorded and sent; each recorded that no longer
-- holds is forgotten and sent as `.resolved`; a deleted key's alerts are forgotten silently. Only for keys of workspaces
-- with an enabled endpoint subscribed to a threshold event. Answers the deliveries written.
-- The keys are read by id, as the changing statement left them (no composite type holds the keys' row type: it would
-- forbid altering the table).
CREATE OR REPLACE FUNCTION keyhaven_apply_key_alerts(p_ids text[], p_credits boolean[], p_expiry boolean[], p_now_m bigint)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  written integer;
BEGIN
  WITH c AS (
    SELECT k, k.id, k.workspace_id, x.credits, x.expiry, k.deleted_at_m IS NOT NULL AS deleted
    FROM unnest(p_ids, p_credits, p_expiry) AS x(id, credits, expiry)
    JOIN keys k ON k.id = x.id
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints e
      WHERE e.workspace_id = k.workspace_id AND e.enabled AND e.events && keyhaven_threshold_events())
  ),
  state AS (
    SELECT c.id, c.workspace_id, s.kind, s.holds FROM c CROSS JOIN LATERAL (
      SELECT 'credits.low' AS kind,
        coalesce((c.k).remaining_requests < keyhaven_credits_low_threshold(c.k), false) AS holds WHERE c.credits
      UNION ALL
      SELECT 'credits.exhausted', coalesce((c.k).remaining_requests = 0, false) WHERE c.credits
      UNION ALL
      SELECT 'expiring', coalesce(w.within > 0 AND (c.k).expires <= to_timestamp((p_now_m + w.within) / 1000.0), false)
        FROM (SELECT keyhaven_expiring_within(c.id, (c.k).api_id) AS within) w WHERE c.expiry
      UNION ALL
      SELECT 'expired', coalesce((c.k).expires <= to_timestamp(p_now_m / 1000.0), false) WHERE c.expiry
    ) s
    WHERE NOT c.deleted
  ),
  raised AS (
    INSERT INTO key_alerts (key_id, kind, workspace_id, since_m)
    SELECT id, kind, workspace_id, p_now_m FROM state WHERE holds
    ON CONFLICT (key_id, kind) DO NOTHING
    RETURNING key_id, kind),
  lifted AS (
    DELETE FROM key_alerts a USING state s WHERE a.key_id = s.id AND a.kind = s.kind AND NOT s.holds
    RETURNING a.key_id, a.kind),
  forgotten AS (
    DELETE FROM key_alerts a USING c WHERE a.key_id = c.id AND c.deleted RETURNING a.key_id),
  events AS (
    SELECT r.key_id, 'key.' || r.kind AS event FROM raised r
    UNION ALL
    SELECT l.key_id, 'key.' || l.kind || '.resolved' FROM lifted l)
  SELECT coalesce(sum(keyhaven_enqueue_event(c.workspace_id, ev.event, p_now_m,
    keyhaven_key_event_data(c.k, ev.event, '{}'::jsonb))), 0)::integer
  FROM events ev JOIN c ON c.id = ev.key_id
  INTO written;
  RETURN written;
END $$;--> statement-breakpoint
-- The triggers: a statement's changed keys, in one call, after a probe of the (small) endpoints table that ends it
-- when no endpoint anywhere is subscribed to a threshold event (what every spend of a workspace without one costs).
CREATE OR REPLACE FUNCTION keyhaven_key_alerts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM webhook_endpoints e WHERE e.enabled AND e.events && keyhaven_threshold_events() LIMIT 1;
  IF NOT FOUND THEN RETURN NULL; END IF;
  PERFORM keyhaven_apply_key_alerts(array_agg(n.id), array_agg(o.remaining_requests IS DISTINCT FROM n.remaining_requests),
      array_agg(o.expires IS DISTINCT FROM n.expires), floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    FROM new_keys n JOIN old_keys o ON o.id = n.id
    WHERE o.remaining_requests IS DISTINCT FROM n.remaining_requests OR o.expires IS DISTINCT FROM n.expires
      OR o.deleted_at_m IS DISTINCT FROM n.deleted_at_m
    HAVING count(*) > 0;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER keys_alerts_updated AFTER UPDATE ON keys REFERENCING OLD TABLE AS old_keys NEW TABLE AS new_keys
  FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_key_alerts_updated();--> statement-breakpoint
-- A key created expiring (or expired) within its lead is so from the start; its credits have crossed nothing yet.
CREATE OR REPLACE FUNCTION keyhaven_key_alerts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM webhook_endpoints e WHERE e.enabled AND e.events && keyhaven_threshold_events() LIMIT 1;
  IF NOT FOUND THEN RETURN NULL; END IF;
  PERFORM keyhaven_apply_key_alerts(array_agg(n.id), array_agg(false), array_agg(true),
      floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    FROM new_keys n WHERE n.expires IS NOT NULL AND n.deleted_at_m IS NULL
    HAVING count(*) > 0;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER keys_alerts_inserted AFTER INSERT ON keys REFERENCING NEW TABLE AS new_keys
  FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_key_alerts_inserted();
