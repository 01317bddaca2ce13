import { InvalidInputError } from "../../errors.js";
import { isStorableText } from "../../storage/lookupText.js";
import { ipWhitelistProblem, MAX_IP_WHITELIST_LENGTH } from "./apis.ipWhitelist.js";

/**
 * The bounds of an API's settings, v1's (apis.createApi): checked here once for every surface that creates or
 * changes an API (createApi, updateApi); the wire schemas state the same numbers from these constants.
 */

/** An API's name: 3 to 256 characters. */
export const API_NAME_MIN = 3;
export const API_NAME_MAX = 256;
/** The prefix of keys created without one: 1 to 8 characters (null: none). */
export const API_DEFAULT_PREFIX_MIN = 1;
export const API_DEFAULT_PREFIX_MAX = 8;
/** Random bytes of a key: 16 to 255 (an API's default and keys.createKey's `byteLength` alike). */
export const KEY_BYTES_MIN = 16;
export const KEY_BYTES_MAX = 255;

/** The settings of an API that people choose, as given (undefined: not given; null: removed). */
export type ApiSettingsInput = {
  name?: string | undefined;
  defaultPrefix?: string | null | undefined;
  defaultBytes?: number | null | undefined;
  ipWhitelist?: string | null | undefined;
};

const textProblem = (label: string, value: string, min: number, max: number): string | undefined => {
  if (!isStorableText(value)) return `The ${label} must not contain a NUL character or an unpaired surrogate.`;
  if (value.length < min || value.length > max) {
    return `The ${label} must be ${min} to ${max} characters long (it has ${value.length}).`;
  }
  return undefined;
};

/** Why a setting cannot be stored, in a sentence for people; undefined when every given one is within its bounds. */
export function apiSettingsProblem(input: ApiSettingsInput): string | undefined {
  if (input.name !== undefined) {
    const problem = textProblem("name", input.name, API_NAME_MIN, API_NAME_MAX);
    if (problem) return problem;
  }
  if (input.defaultPrefix !== undefined && input.defaultPrefix !== null) {
    const problem = textProblem("default prefix", input.defaultPrefix, API_DEFAULT_PREFIX_MIN, API_DEFAULT_PREFIX_MAX);
    if (problem) return problem;
  }
  if (input.defaultBytes !== undefined && input.defaultBytes !== null) {
    const bytes = input.defaultBytes;
    if (!Number.isInteger(bytes) || bytes < KEY_BYTES_MIN || bytes > KEY_BYTES_MAX) {
      return `The default byte length must be a whole number from ${KEY_BYTES_MIN} to ${KEY_BYTES_MAX} (got ${bytes}).`;
    }
  }
  if (input.ipWhitelist !== undefined && input.ipWhitelist !== null) {
    const list = input.ipWhitelist;
    if (list.length === 0) return "The IP allow-list must list at least one address or range (remove it instead).";
    if (list.length > MAX_IP_WHITELIST_LENGTH) return `The IP allow-list is longer than ${MAX_IP_WHITELIST_LENGTH} characters.`;
    const problem = ipWhitelistProblem(list);
    if (problem) return `The IP allow-list is refused: ${problem}.`;
  }
  return undefined;
}

/** Refuses (InvalidInputError, a 400) settings beyond their bounds (apiSettingsProblem). */
export function requireApiSettingsWithinBounds(input: ApiSettingsInput): void {
  const problem = apiSettingsProblem(input);
  if (problem !== undefined) throw new InvalidInputError(problem);
}
