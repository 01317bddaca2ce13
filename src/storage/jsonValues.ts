import { Column, is, type SQL } from "drizzle-orm";

type Decoder = { mapFromDriverValue(value: unknown): unknown };
/** A select's fields in order, each with how drizzle decodes it (a column's decoder, or an SQL field's own). */
export type JsonFields = readonly { key: string; decoder: Decoder | undefined }[];

export function jsonFieldsOf(selection: Record<string, Column | SQL>): JsonFields {
  return Object.entries(selection).map(([key, field]) => {
    const decoder: Decoder | undefined = is(field, Column) ? field : (field as unknown as { decoder?: Decoder }).decoder;
    return { key, decoder };
  });
}

/**
 * A row whose values (in `fields`' order) arrived as PostgreSQL writes them in JSON (`json_build_array`, `row(…)`),
 * decoded as drizzle decodes the columns they come from: text, numbers, booleans, arrays, json and jsonb as they
 * are, timestamps from ISO 8601. `what` names the statement in the error when the count of values is wrong.
 */
export function decodeJsonValues<Row>(fields: JsonFields, raw: readonly unknown[], what: string): Row {
  if (raw.length !== fields.length) throw new Error(`${what} answered ${raw.length} fields, not ${fields.length}`);
  const row: Record<string, unknown> = {};
  fields.forEach(({ key, decoder }, i) => {
    const value = raw[i];
    row[key] = value === null || value === undefined || !decoder ? (value ?? null) : decoder.mapFromDriverValue(value);
  });
  return row as Row;
}
