-- A tag set's counts are keyed by a digest of the set, not by its text: upstream accepts 20 tags of 512 characters
-- (up to 40 KiB in UTF-8) and the primary key holding the text could not index such a set (PostgreSQL's btree
-- entries stop at 8,191 bytes), so one such verification made every write of counts fail, for every workspace.
-- The digest is sha256 of the array's text form (array_out: one text per array, quoting and escaping included), in
-- the UTF-8 bytes of that text. PostgreSQL marks array_out and convert_to stable because some element types' output
-- depends on settings (dates); text's does not, so for text[] the function is immutable, as a generated column needs.
CREATE OR REPLACE FUNCTION keyhaven_tags_hash(tags text[]) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT sha256(convert_to(tags::text, 'UTF8')) $$;--> statement-breakpoint
-- Adding the stored generated column computes it for every existing row (one rewrite of the table).
ALTER TABLE "verification_counts" ADD COLUMN "tags_hash" "bytea" GENERATED ALWAYS AS (keyhaven_tags_hash(tags)) STORED NOT NULL;--> statement-breakpoint
ALTER TABLE "verification_counts" DROP CONSTRAINT "verification_counts_key_id_hour_m_outcome_tags_pk";--> statement-breakpoint
ALTER TABLE "verification_counts" ADD CONSTRAINT "verification_counts_key_id_hour_m_outcome_tags_hash_pk" PRIMARY KEY("key_id","hour_m","outcome","tags_hash");
