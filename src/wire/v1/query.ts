import { z } from "zod";

/** Text in a query string (NUL characters and unpaired surrogates are refused for every route in app.ts). */
export const queryText = z.string();

/**
 * A boolean in a query string: exactly "true" or "false". v1 used z.coerce.boolean, which reads "false" as true;
 * keyhaven refuses anything else with a 400 rather than guess.
 */
export const queryBoolean = z.enum(["true", "false"]).transform((v) => v === "true");

/** An integer in a query string, within [min, max]; "", "1.5", "1e2" and " 7" are refused. */
export function queryInt(min: number, max: number) {
  return z
    .string()
    .regex(/^-?\d+$/, "must be an integer")
    .transform(Number)
    .pipe(z.int().min(min).max(max));
}
