import { insertVerificationLogRows, type VerificationLogRow } from "../src/storage/verificationLog/verificationLog.repository.js";
import type { Harness } from "./helper.js";

export type LogRow = {
  requestId: string;
  timeM: number;
  workspaceId: string;
  apiId: string;
  keyId: string;
  identityId?: string | null;
  externalId?: string | null;
  outcome: string;
  tags?: string[];
  spentCredits?: number;
  latency?: number;
  region?: string;
};

const q = (s: string | null | undefined) => (s === null || s === undefined ? "null" : `'${s.replaceAll("'", "''")}'`);
const tagsSql = (tags: string[] = []) => (tags.length === 0 ? "'{}'::text[]" : `array[${tags.map(q).join(", ")}]::text[]`);

/** Rows of the verification log, written as its flusher writes them (a chunk per workspace and region). */
export async function insertLogRows(h: Harness, rows: LogRow[]): Promise<void> {
  const byRegion = new Map<string, VerificationLogRow[]>();
  for (const r of rows) {
    const region = r.region ?? "local";
    const list = byRegion.get(region) ?? [];
    list.push({
      requestId: r.requestId,
      timeM: r.timeM,
      workspaceId: r.workspaceId,
      keySpaceId: r.apiId,
      keyId: r.keyId,
      identityId: r.identityId ?? null,
      externalId: r.externalId ?? null,
      outcome: r.outcome,
      tags: r.tags,
      spentCredits: r.spentCredits ?? 0,
      latency: r.latency ?? 1,
    });
    byRegion.set(region, list);
  }
  for (const [region, list] of byRegion) await insertVerificationLogRows(h.db, list, region);
}

export type CountRow = {
  keyId: string;
  hourM: number;
  outcome: string;
  tags?: string[];
  workspaceId: string;
  apiId: string;
  identityId?: string | null;
  count: number;
  spentCredits?: number;
  latencySum?: number;
};

/** Rows of verification_counts, written directly. */
export async function insertCountRows(h: Harness, rows: CountRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map(
    (r) =>
      `(${q(r.keyId)}, ${r.hourM}, ${q(r.outcome)}, ${tagsSql(r.tags)}, ${q(r.workspaceId)}, ${q(r.apiId)}, ${q(r.identityId)}, ${r.count},
        ${r.spentCredits ?? 0}, ${r.latencySum ?? 0})`,
  );
  await h.sql(`insert into verification_counts (key_id, hour_m, outcome, tags, workspace_id, api_id, identity_id, count, spent_credits,
    latency_sum) values ${values.join(", ")}`);
}
