-- Webhooks (issue 38 §3, docs/webhooks.md): endpoints per workspace (the signing secret sealed under the workspace's data
-- key), the outbox of deliveries the worker sends (core/webhooks) and the history of their attempts.
CREATE TABLE "webhook_attempts" (
	"delivery_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"at_m" bigint NOT NULL,
	"status" integer,
	"error" text,
	"duration_ms" integer NOT NULL,
	CONSTRAINT "webhook_attempts_delivery_id_attempt_pk" PRIMARY KEY("delivery_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"event" text NOT NULL,
	"payload" jsonb NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"schedule_from" integer DEFAULT 0 NOT NULL,
	"next_attempt_at_m" bigint NOT NULL,
	"lease" text,
	"last_status" integer,
	"last_error" text,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"url" text NOT NULL,
	"events" text[] NOT NULL,
	"description" text,
	"secret_encrypted" text,
	"encryption_key_id" text,
	"enabled" boolean DEFAULT true NOT NULL,
	"created_at_m" bigint NOT NULL,
	"updated_at_m" bigint
);
--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_delivery_id_webhook_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."webhook_deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_endpoint_id_webhook_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."webhook_endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_encryption_key_id_encryption_keys_id_fk" FOREIGN KEY ("encryption_key_id") REFERENCES "public"."encryption_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("next_attempt_at_m") WHERE "webhook_deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_endpoint_idx" ON "webhook_deliveries" USING btree ("endpoint_id","created_at_m","id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_finished_idx" ON "webhook_deliveries" USING btree ("updated_at_m") WHERE "webhook_deliveries"."status" <> 'pending';--> statement-breakpoint
CREATE INDEX "webhook_endpoints_workspace_idx" ON "webhook_endpoints" USING btree ("workspace_id");
--> statement-breakpoint
-- The webhook outbox is written with the change it reports (issue 38 §3): every statement that writes audit entries
-- (the write gate's insert, and the one-statement writes' data-modifying CTEs alike) also writes, in the same
-- statement and so the same transaction, one delivery per entry and enabled endpoint of the entry's workspace
-- subscribed to its event, from its transition table: a change, its entry and its deliveries commit together or not
-- at all. A workspace without endpoints costs one probe of webhook_endpoints_workspace_idx per entry. The payload is
-- Standard Webhooks' {type, timestamp, data}, data the entry as keyhaven.listAuditLogs answers it (core/audit
-- audit.read.ts auditEntryOf), which holds no secret.
CREATE OR REPLACE FUNCTION keyhaven_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (id, workspace_id, endpoint_id, event, payload, next_attempt_at_m, created_at_m, updated_at_m)
  SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), a.workspace_id, e.id, a.event,
    jsonb_build_object(
      'type', a.event,
      'timestamp', to_char(to_timestamp(a.created_at_m / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'data', jsonb_build_object(
        'id', a.id,
        'time', a.created_at_m,
        'event', a.event,
        'workspaceId', a.workspace_id,
        'actor', jsonb_build_object('type', a.actor_kind, 'id', a.actor_id, 'name', a.actor_name),
        'targets', a.targets,
        'description', a.description,
        'context', jsonb_strip_nulls(jsonb_build_object(
          'surface', a.surface, 'requestId', a.request_id, 'location', a.client_address, 'userAgent', a.user_agent))
      ) || CASE WHEN a.details IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('details', a.details) END
    ),
    a.created_at_m, a.created_at_m, a.created_at_m
  FROM written a
  JOIN webhook_endpoints e ON e.workspace_id = a.workspace_id AND e.enabled AND a.event = ANY (e.events);
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER audit_log_webhook_outbox AFTER INSERT ON audit_log REFERENCING NEW TABLE AS written
  FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_webhook_outbox();
