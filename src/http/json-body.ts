import { ApiError } from "../errors.js";

/** Deeper JSON than this is refused: PostgreSQL's jsonb and JSON.stringify both recurse, and no key needs it. */
export const MAX_JSON_DEPTH = 64;
/**
 * More objects and arrays than this in one body are refused before parsing: building each costs the parser far
 * more than a number or a string (1 MiB of `[[]]` took about 100 ms of CPU to parse), and a full import batch of
 * 100 keys, with its meta, needs a few thousand.
 */
export const MAX_JSON_CONTAINERS = 50_000;

/**
 * Parses a request body, refusing what PostgreSQL cannot store (so it is a 400 here, never a 500 later):
 * NUL characters and lone UTF-16 surrogates in any string or property name, and nesting deeper than MAX_JSON_DEPTH;
 * and what would cost the parser most: more than MAX_JSON_CONTAINERS objects and arrays.
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "") throw new ApiError("BAD_REQUEST", "Request body is empty; expected JSON");
  const shape = measureJson(text);
  if (shape.depth > MAX_JSON_DEPTH) {
    throw new ApiError("BAD_REQUEST", `JSON is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (shape.containers > MAX_JSON_CONTAINERS) {
    throw new ApiError("BAD_REQUEST", `JSON holds more than ${MAX_JSON_CONTAINERS} objects and arrays`);
  }
  try {
    // The reviver is only needed when an escape could produce a NUL or a surrogate; skip its cost otherwise.
    return text.includes("\\u") ? JSON.parse(text, rejectUnstorableStrings) : JSON.parse(text);
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError("BAD_REQUEST", "Malformed JSON in request body");
  }
}

/**
 * Why parseJsonBody would refuse this JSON text (nesting deeper than MAX_JSON_DEPTH, more than MAX_JSON_CONTAINERS
 * objects and arrays, a NUL or an unpaired surrogate in a string or property name, or malformed JSON), or
 * undefined. Pure: `keyhaven import` checks each key with it, so that it refuses before sending what the server
 * would refuse.
 */
export function unstorableJsonProblem(text: string): string | undefined {
  try {
    parseJsonBody(text);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

function rejectUnstorableStrings(this: unknown, key: string, value: unknown): unknown {
  if (!isStorable(key) || (typeof value === "string" && !isStorable(value))) {
    throw new ApiError(
      "BAD_REQUEST",
      "JSON strings must not contain the NUL character (\\u0000) or unpaired surrogates (\\ud800-\\udfff)",
    );
  }
  return value;
}

function isStorable(s: string): boolean {
  return !s.includes("\u0000") && s.isWellFormed();
}

/**
 * Deepest nesting of arrays and objects, and how many there are, ignoring brackets inside strings; stops once
 * either is over its limit.
 */
function measureJson(text: string): { depth: number; containers: number } {
  let depth = 0;
  let max = 0;
  let containers = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) max = depth;
      if (max > MAX_JSON_DEPTH || ++containers > MAX_JSON_CONTAINERS) break;
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--;
  }
  return { depth: max, containers };
}
