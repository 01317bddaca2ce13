import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

/** The longest endpoint URL accepted. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;
/** How long resolving an endpoint's host may take (at creation; a delivery's own deadline bounds it there). */
export const WEBHOOK_DNS_DEADLINE_MS = 5_000;

/** Why an address is not one keyhaven sends webhooks to (unless KEYHAVEN_WEBHOOK_ALLOW_PRIVATE=true). */
export type NonPublicKind = "loopback" | "private" | "link-local" | "unique-local" | "unspecified" | "multicast or reserved";

/**
 * What an IPv4 address is when it is not public: loopback (127/8), private (10/8, 172.16/12, 192.168/16, the shared
 * 100.64/10), link-local (169.254/16, where cloud metadata services answer), unspecified (0/8), multicast or reserved
 * (224/4, 240/4). Undefined: public.
 */
function classifyIpv4(address: string): NonPublicKind | undefined {
  const [a = 0, b = 0] = address.split(".").map(Number);
  if (a === 0) return "unspecified";
  if (a === 127) return "loopback";
  if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127)) {
    return "private";
  }
  if (a === 169 && b === 254) return "link-local";
  if (a >= 224) return "multicast or reserved";
  return undefined;
}

/** The eight 16-bit groups of an IPv6 address (isIP said it is one), an embedded dotted IPv4 tail included. */
function ipv6Groups(address: string): number[] {
  let text = address.split("%")[0]!.toLowerCase();
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const [a = 0, b = 0, c = 0, d = 0] = tail[1]!.split(".").map(Number);
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const zeros = rest === undefined ? [] : new Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].map((g) => Number.parseInt(g, 16));
}

/** What an IPv6 address is when it is not public; an IPv4 address within it (mapped, NAT64, compatible) is judged as IPv4. */
function classifyIpv6(address: string): NonPublicKind | undefined {
  const g = ipv6Groups(address);
  const v4 = () => `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  if (g.every((x) => x === 0)) return "unspecified";
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return "loopback";
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) return classifyIpv4(v4());
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return classifyIpv4(v4());
  if ((g[0]! & 0xfe00) === 0xfc00) return "unique-local";
  if ((g[0]! & 0xffc0) === 0xfe80) return "link-local";
  if ((g[0]! & 0xffc0) === 0xfec0) return "private";
  if ((g[0]! & 0xff00) === 0xff00) return "multicast or reserved";
  return undefined;
}

/** What `address` (an IP address) is when keyhaven must not send a webhook there by default; undefined: public. */
export function nonPublicKindOf(address: string): NonPublicKind | undefined {
  const family = isIP(address);
  if (family === 4) return classifyIpv4(address);
  if (family === 6) return classifyIpv6(address);
  return "unspecified";
}

/** An address an endpoint's host resolved to, and its family. */
export type ResolvedAddress = { address: string; family: 4 | 6 };

/** An endpoint's URL, parsed, with the address a delivery connects to (the one checked: no second lookup). */
export type WebhookTarget = { url: URL; address: ResolvedAddress };

/** Why an endpoint's URL is refused, worded for the client (the field first), or the target it resolves to. */
export type UrlCheck = { ok: true; target: WebhookTarget } | { ok: false; problem: string; permanent: boolean };

/** The parts of the URL rule that need no lookup: undefined when `text` may be an endpoint's URL, else the problem. */
export function urlSyntaxProblem(text: string): string | undefined {
  if (text.length > MAX_WEBHOOK_URL_LENGTH) return `url: must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "url: must be an absolute http or https URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return `url: must use https or http, not ${url.protocol.slice(0, -1)}`;
  if (url.username !== "" || url.password !== "") return "url: must not contain a user name or password";
  if (url.hash !== "") return "url: must not contain a fragment (#…)";
  if (url.hostname === "") return "url: must name a host";
  return undefined;
}

/** The host of `url` as an IP address when it is one (brackets of an IPv6 literal removed), else undefined. */
function ipLiteralOf(url: URL): string | undefined {
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return isIP(host) === 0 ? undefined : host;
}

/** Resolves `host` to every address it has, within `deadlineMs`. */
async function resolveWithin(host: string, deadlineMs: number): Promise<ResolvedAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      lookup(host, { all: true, verbatim: true }).then((all) =>
        all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }) as const),
      ),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error("lookup timed out"), { code: "ETIMEOUT" })), deadlineMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The one rule for an endpoint's URL, at creation and again before each delivery: http(s), at most 2048 characters,
 * no credentials, and, unless `allowPrivate` (KEYHAVEN_WEBHOOK_ALLOW_PRIVATE=true), a host that is and resolves to
 * public addresses only: every address the host has is checked, so one record pointing inside is enough to refuse,
 * and the target carries the checked address for the delivery to connect to (no DNS rebinding between the check
 * and the connection). `permanent`: false when the host did not resolve (a delivery tries again later).
 */
export async function checkWebhookUrl(text: string, allowPrivate: boolean, deadlineMs = WEBHOOK_DNS_DEADLINE_MS): Promise<UrlCheck> {
  const syntax = urlSyntaxProblem(text);
  if (syntax !== undefined) return { ok: false, problem: syntax, permanent: true };
  const url = new URL(text);
  const literal = ipLiteralOf(url);
  let addresses: ResolvedAddress[];
  if (literal !== undefined) {
    addresses = [{ address: literal, family: isIP(literal) === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await resolveWithin(url.hostname, deadlineMs);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      return {
        ok: false,
        problem: `url: the host ${url.hostname} does not resolve (${typeof code === "string" ? code : "lookup failed"})`,
        permanent: false,
      };
    }
    if (addresses.length === 0) return { ok: false, problem: `url: the host ${url.hostname} has no address`, permanent: false };
  }
  if (!allowPrivate) {
    for (const { address } of addresses) {
      const kind = nonPublicKindOf(address);
      if (kind === undefined) continue;
      const where = literal !== undefined ? `the host ${literal} is` : `the host ${url.hostname} resolves to ${address},`;
      return {
        ok: false,
        problem: `url: ${where} ${kind === "unspecified" ? "an" : "a"} ${kind} address; webhooks are sent to public addresses only (set KEYHAVEN_WEBHOOK_ALLOW_PRIVATE=true to allow it)`,
        permanent: true,
      };
    }
  }
  return { ok: true, target: { url, address: addresses[0]! } };
}
