/**
 * `keyhaven import --from-unkey --check`: reads both sides and reports, per --api, the keys upstream vs in keyhaven,
 * keyhaven's pending, verifiable and adopted counts (POST /v2/keyhaven.getCopyStatus), and every field that differs
 * per key. keyhaven's keys are read with the same v2 client as Unkey's (keyhaven speaks Unkey v2's apis.listKeys).
 * Writes nothing. A difference names the key and the field, never a value (a meta value may be a secret).
 */
import { fmt } from "../import/import.progress.js";
import { type CopyStatus, type KeyhavenTarget, TargetError } from "./fromUnkey.copy.js";
import { UnkeyError, type UnkeyClient } from "./unkey.client.js";
import type { UnkeyKey } from "../../unkey/unkey.schemas.js";

const EXIT = { ok: 0, differs: 1, unavailable: 3 } as const;

/** The fields compared, each as a value both sides' answers give alike (lists sorted, rate limits without ids). */
const FIELDS: Record<string, (k: UnkeyKey) => unknown> = {
  start: (k) => k.start,
  createdAt: (k) => k.createdAt,
  name: (k) => k.name,
  meta: (k) => k.meta,
  expires: (k) => k.expires,
  enabled: (k) => k.enabled,
  "credits.remaining": (k) => k.credits?.remaining,
  "credits.refill": (k) => k.credits?.refill,
  ratelimits: (k) =>
    (k.ratelimits ?? [])
      .map((r) => ({ name: r.name, limit: r.limit, duration: r.duration, autoApply: r.autoApply }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  roles: (k) => [...(k.roles ?? [])].sort(),
  permissions: (k) => [...(k.permissions ?? [])].sort(),
  identity: (k) => (k.identity ? { id: k.identity.id, externalId: k.identity.externalId } : undefined),
};

/** A JSON text with object keys sorted, so that two equal values compare equal whatever order their keys came in. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

export function differingFields(upstream: UnkeyKey, copy: UnkeyKey): string[] {
  return Object.entries(FIELDS)
    .filter(([, pick]) => canonical(pick(upstream)) !== canonical(pick(copy)))
    .map(([field]) => field);
}

type ApiCheck = {
  apiId: string;
  upstream: number;
  keyhaven: number;
  status: CopyStatus;
  missing: string[];
  extra: string[];
  differing: { keyId: string; fields: string[] }[];
  equal: boolean;
};

async function all(pages: AsyncIterable<{ items: UnkeyKey[] }>): Promise<UnkeyKey[]> {
  const out: UnkeyKey[] = [];
  for await (const page of pages) out.push(...page.items);
  return out;
}

const SHOWN = 20;

export async function checkCopy(o: {
  unkey: UnkeyClient;
  keyhaven: UnkeyClient;
  target: KeyhavenTarget;
  apiIds: string[];
  unkeyUrl: string;
  keyhavenUrl: string;
  json: boolean;
}): Promise<number> {
  let statuses: CopyStatus[];
  const checks: ApiCheck[] = [];
  try {
    statuses = await o.target.copyStatus(o.apiIds);
    for (const apiId of o.apiIds) {
      const status = statuses.find((s) => s.apiId === apiId) ?? { apiId, found: false };
      const upstream = await all(o.unkey.listKeys(apiId));
      const copies = status.found ? await all(o.keyhaven.listKeys(apiId)) : [];
      const byId = new Map(copies.map((k) => [k.keyId, k]));
      const upstreamIds = new Set(upstream.map((k) => k.keyId));
      const missing: string[] = [];
      const differing: ApiCheck["differing"] = [];
      for (const key of upstream) {
        const copy = byId.get(key.keyId);
        if (!copy) missing.push(key.keyId);
        else {
          const fields = differingFields(key, copy);
          if (fields.length > 0) differing.push({ keyId: key.keyId, fields });
        }
      }
      const extra = copies.filter((k) => !upstreamIds.has(k.keyId)).map((k) => k.keyId);
      checks.push({
        apiId,
        upstream: upstream.length,
        keyhaven: copies.length,
        status,
        missing,
        extra,
        differing,
        equal: status.found && missing.length === 0 && extra.length === 0 && differing.length === 0,
      });
    }
  } catch (err) {
    if (err instanceof UnkeyError || err instanceof TargetError) {
      console.error(`keyhaven import --from-unkey --check: ${err.message}. Nothing was written.`);
      return err.kind === "refused" ? EXIT.differs : EXIT.unavailable;
    }
    throw err;
  }
  const equal = checks.every((c) => c.equal);
  if (o.json) {
    console.log(JSON.stringify({ unkeyUrl: o.unkeyUrl, keyhavenUrl: o.keyhavenUrl, equal, apis: checks }));
    return equal ? EXIT.ok : EXIT.differs;
  }
  const lines = [`Compared ${o.unkeyUrl} with ${o.keyhavenUrl}: ${equal ? "every key is copied and equal" : "they differ"}.`];
  for (const c of checks) {
    if (!c.status.found) {
      lines.push(`${c.apiId}: ${fmt(c.upstream)} keys upstream; not in keyhaven (not copied yet?)`);
      continue;
    }
    const s = c.status;
    lines.push(
      `${c.apiId}: ${fmt(c.upstream)} keys upstream, ${fmt(c.keyhaven)} in keyhaven (verifiable ${fmt(s.verifiable ?? 0)}, ` +
        `pending ${fmt(s.pending ?? 0)}, adopted ${fmt(s.adopted ?? 0)}); missing ${fmt(c.missing.length)}, ` +
        `only in keyhaven ${fmt(c.extra.length)}, differing ${fmt(c.differing.length)}`,
    );
    const list = (label: string, ids: string[]) => {
      if (ids.length === 0) return;
      const more = ids.length > SHOWN ? ` and ${fmt(ids.length - SHOWN)} more (--json lists all)` : "";
      lines.push(`  ${label}: ${ids.slice(0, SHOWN).join(", ")}${more}`);
    };
    list("missing in keyhaven", c.missing);
    list("only in keyhaven", c.extra);
    for (const d of c.differing.slice(0, SHOWN)) lines.push(`  ${d.keyId} differs: ${d.fields.join(", ")}`);
    if (c.differing.length > SHOWN) lines.push(`  and ${fmt(c.differing.length - SHOWN)} more keys differ (--json lists all)`);
  }
  console.log(lines.join("\n"));
  return equal ? EXIT.ok : EXIT.differs;
}
