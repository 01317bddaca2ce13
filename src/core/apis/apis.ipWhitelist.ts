import { BlockList, isIP } from "node:net";
import { LRUCache } from "lru-cache";
import { z } from "zod";

/**
 * An API's IP allow-list (v1's `ipWhitelist`): a comma-separated list of IPv4 and IPv6 addresses, each trimmed, as v1
 * split it. Single addresses only, no CIDR ranges (v1 compared exact strings, so a v1 list never held a working
 * range). keyhaven compares addresses rather than strings: `::1` matches `0:0:0:0:0:0:0:1`, and an IPv4 address
 * matches its IPv4-mapped IPv6 form (`::ffff:10.0.0.1`, what a server listening on `::` sees for an IPv4 client).
 */

/** The longest list accepted: v1's column held 512 characters; this leaves room for about a hundred IPv6 addresses. */
export const MAX_IP_WHITELIST_LENGTH = 4096;

const entriesOf = (list: string) => list.split(",").map((entry) => entry.trim());

const familyOf = (address: string): "ipv4" | "ipv6" | undefined => {
  const family = isIP(address);
  return family === 4 ? "ipv4" : family === 6 ? "ipv6" : undefined;
};

/** Why a submitted list cannot be stored; undefined when every entry is an address. */
export function ipWhitelistProblem(list: string): string | undefined {
  for (const [i, entry] of entriesOf(list).entries()) {
    if (entry === "") return `entry ${i + 1} is empty: separate the addresses with single commas`;
    if (familyOf(entry) === undefined) {
      return entry.includes("/")
        ? `"${entry}" is a range: list single IPv4 or IPv6 addresses (CIDR ranges are not supported)`
        : `"${entry}" is not an IPv4 or IPv6 address`;
    }
  }
  return undefined;
}

/**
 * The list as an input field: a non-empty string of addresses (contract 4.2 step 6). An empty string would mean no
 * list at all, which v1 wrote as an absent value; keyhaven asks for that (null in apis.updateApi) instead.
 */
export const ipWhitelistInput = z
  .string()
  .min(1, { error: "must list at least one address (send null to apis.updateApi to remove the list)" })
  .max(MAX_IP_WHITELIST_LENGTH)
  .superRefine((list, ctx) => {
    const problem = ipWhitelistProblem(list);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  });

/** Lists compiled for checking, by their text: a list changes rarely and is checked on every verification. */
/** Distinct lists kept compiled (one per API with a list, in practice); beyond it the least recently used is compiled again when needed. */
const compiled = new LRUCache<string, BlockList>({ max: 1000 });

function compile(list: string): BlockList {
  let allowed = compiled.get(list);
  if (allowed === undefined) {
    allowed = new BlockList();
    for (const entry of entriesOf(list)) {
      const family = familyOf(entry);
      if (family !== undefined) allowed.addAddress(entry, family);
    }
    compiled.set(list, allowed);
  }
  return allowed;
}

/**
 * Whether a caller may verify keys of an API with this list (contract 4.2 step 6): without a list, anyone; with
 * one, only a caller whose address is listed; a caller without a usable address, never.
 */
export function ipAllowed(list: string | null, callerIp: string | undefined): boolean {
  if (list === null || list.trim() === "") return true;
  const family = callerIp === undefined ? undefined : familyOf(callerIp);
  if (family === undefined) return false;
  return compile(list).check(callerIp!, family);
}
