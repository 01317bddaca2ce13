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

/** Rows of the verification log, written directly (what wp-vlog's recorder writes for each verification). */
export async function insertLogRows(h: Harness, rows: LogRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map(
    (r) =>
      `(${q(r.requestId)}, ${r.timeM}, ${q(r.workspaceId)}, ${q(r.apiId)}, ${q(r.keyId)}, ${q(r.identityId)}, ${q(r.externalId)},
        ${q(r.outcome)}, ${tagsSql(r.tags)}, ${r.spentCredits ?? 0}, ${r.latency ?? 1}, ${q(r.region ?? "local")})`,
  );
  await h.sql(`insert into key_verifications_log (request_id, time_m, workspace_id, key_space_id, key_id, identity_id, external_id,
    outcome, tags, spent_credits, latency, region) values ${values.join(", ")}`);
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
