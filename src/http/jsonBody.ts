import { ApiError } from "./errors.js";

/** Deeper JSON than this is refused: PostgreSQL's jsonb and JSON.stringify both recurse, and no key needs it. */
export const MAX_JSON_DEPTH = 64;
/**
 * More objects and arrays than this in one body are refused before parsing: building each costs the parser far
 * more than a number or a string (1 MiB of `[[]]` took about 100 ms of CPU to parse), and a full import batch of
 * 100 keys, with its meta, needs a few thousand.
 */
export const MAX_JSON_CONTAINERS = 50_000;
/**
 * More properties than this in one object are refused before parsing: the parser builds a large object as a slow
 * dictionary (1 MiB of one object's properties took 45–110 ms of CPU), and no key's meta needs a thousand.
 */
export const MAX_JSON_OBJECT_PROPERTIES = 1_000;

const UNSTORABLE_STRING = "JSON strings must not contain the NUL character (\\u0000) or unpaired surrogates (\\ud800-\\udfff)";

/**
 * Parses a request body, refusing what PostgreSQL cannot store (so it is a 400 here, never a 500 later):
 * NUL characters and lone UTF-16 surrogates in any string or property name, and nesting deeper than MAX_JSON_DEPTH;
 * and what would cost the parser most: more than MAX_JSON_CONTAINERS objects and arrays, or an object with more than
 * MAX_JSON_OBJECT_PROPERTIES properties. `lookupOnly` names top-level fields of the body whose string is only looked
 * up, never stored (v2's apis.listKeys `apiId`, identities' `identity`): such text there names nothing, a 404 upstream,
 * which the repositories answer without a query (storage/lookupText.ts); anywhere else it is still refused.
 */
export function parseJsonBody(text: string, lookupOnly?: readonly string[]): unknown {
  if (text.trim() === "") throw new ApiError("BAD_REQUEST", "Request body is empty; expected JSON");
  const shape = measureJson(text);
  if (shape.depth > MAX_JSON_DEPTH) {
    throw new ApiError("BAD_REQUEST", `JSON is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (shape.containers > MAX_JSON_CONTAINERS) {
    throw new ApiError("BAD_REQUEST", `JSON holds more than ${MAX_JSON_CONTAINERS} objects and arrays`);
  }
  if (shape.properties > MAX_JSON_OBJECT_PROPERTIES) {
    throw new ApiError("BAD_REQUEST", `JSON has an object with more than ${MAX_JSON_OBJECT_PROPERTIES} properties`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError("BAD_REQUEST", "Malformed JSON in request body");
  }
  // Found by the scan, which saw every escape: a reviver visiting every value would cost more than the parse.
  if ((shape.unstorable || !text.isWellFormed()) && !(lookupOnly && unstorableOnlyIn(value, lookupOnly))) {
    throw new ApiError("BAD_REQUEST", UNSTORABLE_STRING);
  }
  return value;
}

const storable = (text: string) => !text.includes("\u0000") && text.isWellFormed();

/** Whether every string and property name PostgreSQL cannot hold is the string value of one of `fields` at the top. */
function unstorableOnlyIn(body: unknown, fields: readonly string[]): boolean {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return false;
  return Object.entries(body).every(
    ([name, value]) => storable(name) && ((fields.includes(name) && typeof value === "string") || storableThroughout(value)),
  );
}

/** Whether `value` holds only text PostgreSQL can store (the parser's limits bound the walk). */
function storableThroughout(value: unknown): boolean {
  if (typeof value === "string") return storable(value);
  if (value === null || typeof value !== "object") return true;
  if (Array.isArray(value)) return value.every(storableThroughout);
  return Object.entries(value).every(([name, v]) => storable(name) && storableThroughout(v));
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

/**
 * In one pass, ignoring brackets inside strings: the deepest nesting of arrays and objects, how many there are, the
 * most properties of one object (stops once one of them is over its limit), and whether a string or property name
 * holds what PostgreSQL cannot store. JSON text (valid UTF-8, decoded) holds a NUL or a lone surrogate only through
 * a `\\u` escape: `\\u0000`, a high surrogate not followed by a low one, or a low one alone.
 */
function measureJson(text: string): { depth: number; containers: number; properties: number; unstorable: boolean } {
  let depth = 0;
  let max = 0;
  let containers = 0;
  let mostProperties = 0;
  let unstorable = false;
  // Per open container: its property count, or -1 for an array.
  const properties: number[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) {
        if (text.charCodeAt(i + 1) === 117 /* u */) {
          const unit = parseInt(text.slice(i + 2, i + 6), 16);
          if (unit === 0 || (unit >= 0xdc00 && unit <= 0xdfff)) unstorable = true;
          else if (unit >= 0xd800 && unit <= 0xdbff) {
            const next = text.charCodeAt(i + 7) === 117 && text.charCodeAt(i + 6) === 92 ? parseInt(text.slice(i + 8, i + 12), 16) : NaN;
            if (next >= 0xdc00 && next <= 0xdfff) i += 6;
            else unstorable = true;
          }
          i += 5;
        } else i++;
      } else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) max = depth;
      properties.push(c === 123 ? 0 : -1);
      if (max > MAX_JSON_DEPTH || ++containers > MAX_JSON_CONTAINERS) break;
    } else if (c === 93 /* ] */ || c === 125 /* } */) {
      depth--;
      properties.pop();
    } else if (c === 58 /* : */ && properties.length > 0) {
      const top = properties.length - 1;
      if (properties[top]! >= 0 && ++properties[top]! > mostProperties) {
        mostProperties = properties[top]!;
        if (mostProperties > MAX_JSON_OBJECT_PROPERTIES) break;
      }
    }
  }
  return { depth: max, containers, properties: mostProperties, unstorable };
}
