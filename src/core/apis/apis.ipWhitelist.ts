import { BlockList, isIP } from "node:net";
import { LRUCache } from "lru-cache";
import { z } from "zod";

/**
 * An API's IP allow-list (v1's `ipWhitelist`): a comma-separated list of IPv4 and IPv6 addresses and CIDR ranges
 * (`10.0.0.0/8`, `2001:db8::/32`), each trimmed, as v1 split it. v1 compared exact strings, so a v1 list never held
 * a working range; keyhaven compares addresses, with node's BlockList: `::1` matches `0:0:0:0:0:0:0:1`, and an IPv4
 * address or range matches the IPv4-mapped IPv6 form (`::ffff:10.0.0.1`, what a server listening on `::` sees for an
 * IPv4 client).
 */

/** The longest list accepted: v1's column held 512 characters; this leaves room for about a hundred IPv6 addresses. */
export const MAX_IP_WHITELIST_LENGTH = 4096;

const entriesOf = (list: string) => list.split(",").map((entry) => entry.trim());

type Family = "ipv4" | "ipv6";

const familyOf = (address: string): Family | undefined => {
  const family = isIP(address);
  return family === 4 ? "ipv4" : family === 6 ? "ipv6" : undefined;
};

/** One entry of a list: an address, or a range (`address/prefix`, the prefix in bits: 0-32 for IPv4, 0-128 for IPv6). */
type Entry = { address: string; family: Family; prefix: number | undefined };

/** An entry as BlockList takes it, or why it is not one. BlockList itself checks the address and the prefix's range. */
function parseEntry(entry: string): Entry | string {
  const slash = entry.indexOf("/");
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const family = familyOf(address);
  if (family === undefined) return `"${entry}" is not an IPv4 or IPv6 address or CIDR range`;
  if (slash < 0) return { address, family, prefix: undefined };
  const bits = entry.slice(slash + 1);
  const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : Number.NaN;
  try {
    new BlockList().addSubnet(address, prefix, family);
  } catch {
    return `"${entry}" is not a CIDR range: the prefix after "/" must be 0 to ${family === "ipv4" ? 32 : 128} bits`;
  }
  return { address, family, prefix };
}

/** Why a submitted list cannot be stored; undefined when every entry is an address or a range. */
export function ipWhitelistProblem(list: string): string | undefined {
  for (const [i, entry] of entriesOf(list).entries()) {
    if (entry === "") return `entry ${i + 1} is empty: separate the entries with single commas`;
    const parsed = parseEntry(entry);
    if (typeof parsed === "string") return parsed;
  }
  return undefined;
}

/**
 * The list as an input field: a non-empty string of addresses (contract 4.2 step 6). An empty string would mean no
 * list at all, which v1 wrote as an absent value; keyhaven asks for that (null in apis.updateApi) instead.
 */
export const ipWhitelistInput = z
  .string()
  .min(1, { error: "must list at least one address or range (send null to apis.updateApi to remove the list)" })
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
    for (const text of entriesOf(list)) {
      // A stored list was checked when it was written; an entry that does not parse (none should) allows nobody.
      const entry = parseEntry(text);
      if (typeof entry === "string") continue;
      if (entry.prefix === undefined) allowed.addAddress(entry.address, entry.family);
      else allowed.addSubnet(entry.address, entry.prefix, entry.family);
    }
    compiled.set(list, allowed);
  }
  return allowed;
}

/**
 * Whether a caller may verify keys of an API with this list (contract 4.2 step 6): without a list, anyone; with
 * one, only a caller whose address is listed or in a listed range; a caller without a usable address, never.
 */
export function ipAllowed(list: string | null, callerIp: string | undefined): boolean {
  if (list === null || list.trim() === "") return true;
  const family = callerIp === undefined ? undefined : familyOf(callerIp);
  if (family === undefined) return false;
  return compile(list).check(callerIp!, family);
}
