import { z } from "zod";

/**
 * Validation messages in zod 3's wording, the one Unkey v1 answered with (`Required`, `Expected string, received
 * number`, `String must contain at least 3 character(s)`, …) and its clients show: zod 4's default map, set once for
 * the whole process. It only words the issues zod raises by itself; a schema's own message (`.refine(…, "…")`,
 * `{ error }`) still wins. Imported (for this effect) by every module that turns issues into text: app.ts, config.ts
 * and the import CLI's validator.
 *
 * The wording follows zod 3's `locales/en.ts` and its names of types (`ZodParsedType`), issue kind by issue kind.
 */
export function zod3Message(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return "Required";
      if (issue.expected === "int") {
        // zod 3 checked the type first (a number), then `.int()`: a number that is not whole is a float to it.
        return typeof issue.input === "number" ? "Expected integer, received float" : expectedReceived("number", issue.input);
      }
      return expectedReceived(ZOD3_EXPECTED[issue.expected] ?? issue.expected, issue.input);
    case "too_small":
    case "too_big":
      return sizeMessage(issue);
    case "invalid_value": {
      // zod 4 raises this for enums and literals alike; zod 3 worded them differently.
      const type = (issue.inst as { _zod?: { def?: { type?: string } } } | undefined)?._zod?.def?.type;
      if (type === "literal" && issue.values.length === 1) {
        return `Invalid literal value, expected ${JSON.stringify(issue.values[0], bigintAsString)}`;
      }
      // zod 3's enum checked the type first: a value that is not a string was a wrong type, not a wrong option.
      if (typeof issue.input !== "string") return expectedReceived(joinValues(issue.values), issue.input);
      return `Invalid enum value. Expected ${joinValues(issue.values)}, received '${issue.input}'`;
    }
    case "unrecognized_keys":
      return `Unrecognized key(s) in object: ${joinValues(issue.keys, ", ")}`;
    case "invalid_union": {
      const options = (issue as { options?: unknown }).options;
      if (issue.discriminator !== undefined && Array.isArray(options)) {
        return `Invalid discriminator value. Expected ${joinValues(options)}`;
      }
      return "Invalid input";
    }
    case "invalid_format":
      return formatMessage(issue);
    case "not_multiple_of":
      return `Number must be a multiple of ${issue.divisor}`;
    case "invalid_key":
    case "invalid_element":
      // zod 3 reported what was wrong with the key or element itself (worded by this map too).
      return issue.issues[0]?.message ?? "Invalid input";
    case "custom":
      return "Invalid input";
    default:
      return undefined;
  }
}

z.config({ customError: zod3Message });

/**
 * `params` of a custom issue whose message is answered alone, without the path of the field it is about: v1 raised
 * some checks in its handlers, after validation, and its messages there carry no path.
 */
export const UNPREFIXED = { unprefixed: true } as const;

/**
 * An issue as v1 answered it: `<path joined by ".">: <message>` (an empty path leaves `: <message>`), or the message
 * alone for an issue raised with UNPREFIXED.
 */
export function issueText(path: string, message: string, params?: unknown): string {
  return isUnprefixed(params) ? message : `${path}: ${message}`;
}

export function isUnprefixed(params: unknown): boolean {
  return (params as { unprefixed?: unknown } | undefined)?.unprefixed === true;
}

/** zod 3's `Expected <type>, received <type>`, e.g. for a schema whose own error keeps that wording (meta). */
export function expectedReceived(expected: string, input: unknown): string {
  return input === undefined ? "Required" : `Expected ${expected}, received ${zod3TypeOf(input)}`;
}

/** zod 4's names of expected types where zod 3's differ. */
const ZOD3_EXPECTED: Record<string, string> = { int: "integer", record: "object", tuple: "array" };

/** zod 3's name of a value's type (`getParsedType`): `nan`, `null` and `array` apart from number and object. */
function zod3TypeOf(value: unknown): string {
  switch (typeof value) {
    case "number":
      return Number.isNaN(value) ? "nan" : "number";
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) return "array";
      const v = value as { then?: unknown; catch?: unknown };
      if (typeof v.then === "function" && typeof v.catch === "function") return "promise";
      if (value instanceof Map) return "map";
      if (value instanceof Set) return "set";
      if (value instanceof Date) return "date";
      return "object";
    }
    default:
      return typeof value;
  }
}

/** zod 3's `util.joinValues`: strings quoted with ', joined by ` | `. */
function joinValues(values: readonly unknown[], separator = " | "): string {
  return values.map((v) => (typeof v === "string" ? `'${v}'` : v)).join(separator);
}

function bigintAsString(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}

type SizeIssue = Extract<z.core.$ZodRawIssue, { code: "too_small" | "too_big" }>;

function sizeMessage(issue: SizeIssue): string {
  const small = issue.code === "too_small";
  const bound = small ? (issue as { minimum: number | bigint }).minimum : (issue as { maximum: number | bigint }).maximum;
  const { exact, inclusive } = issue;
  switch (issue.origin) {
    case "array":
      return `Array must contain ${exact ? "exactly" : small ? (inclusive ? "at least" : "more than") : inclusive ? "at most" : "less than"} ${bound} element(s)`;
    case "string":
      return `String must contain ${exact ? "exactly" : small ? (inclusive ? "at least" : "over") : inclusive ? "at most" : "under"} ${bound} character(s)`;
    case "number":
    case "int":
    case "bigint":
      if (small) {
        return `Number must be ${exact ? "exactly equal to " : inclusive ? "greater than or equal to " : "greater than "}${bound}`;
      }
      return `${issue.origin === "bigint" ? "BigInt" : "Number"} must be ${exact ? "exactly" : inclusive ? "less than or equal to" : "less than"} ${bound}`;
    case "date":
      if (small) {
        return `Date must be ${exact ? "exactly equal to " : inclusive ? "greater than or equal to " : "greater than "}${new Date(Number(bound))}`;
      }
      return `Date must be ${exact ? "exactly" : inclusive ? "smaller than or equal to" : "smaller than"} ${new Date(Number(bound))}`;
    default:
      return "Invalid input";
  }
}

function formatMessage(issue: Extract<z.core.$ZodRawIssue, { code: "invalid_format" }>): string {
  const i = issue as { format: string; prefix?: string; suffix?: string; includes?: string };
  switch (i.format) {
    case "regex":
      return "Invalid";
    case "starts_with":
      return `Invalid input: must start with "${i.prefix}"`;
    case "ends_with":
      return `Invalid input: must end with "${i.suffix}"`;
    case "includes":
      return `Invalid input: must include "${i.includes}"`;
    case "ipv4":
    case "ipv6":
      return "Invalid ip";
    case "cidrv4":
    case "cidrv6":
      return "Invalid cidr";
    default:
      return `Invalid ${i.format}`;
  }
}
