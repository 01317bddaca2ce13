import type { z } from "zod";
import { getVerifications, planVerifications, type VerificationsQuery } from "../../core/analytics/analytics.core.js";
import { identityPermission } from "../../core/auth/permissions.query.js";
import {
  createIdentity,
  deleteIdentityByRef,
  getIdentityByRef,
  type Identity,
  listIdentitiesByPage,
  listKeysOfIdentity,
  updateIdentityByRef,
} from "../../core/identities/identities.core.js";
import type { IdentityKeyRow } from "../../storage/identities/identities.repository.js";
import { externalIdInput, metaInput, ratelimitsInput, V2_IDENTITY_RULES } from "../../wire/v2/identities/identities.schemas.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, type FormFields, field, type PageAnswer, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
  can,
  Chart,
  type ChartSeries,
  ColumnHeads,
  cursorOf,
  DangerCard,
  doneNotice,
  errorNotice as error,
  Field,
  NextPage,
  type Notice,
  PageLink,
  paramsOf,
  type Parsed,
  parseMetaJson,
  parseWith,
  refusedPage,
  when,
  wholeNumber,
} from "../ui.js";

type Ctx = PageContext<"rootKey">;

const PAGE = 50;
const KEYS_PAGE = 50;
/** The most APIs of an identity's keys the chart sums (one indexed query each). */
const CHART_APIS = 10;
const DAY_MS = 86_400_000;
/** Empty rate-limit rows a form offers besides the identity's own. */
const BLANK_ROWS = 2;
/** The most rate-limit rows a form is read for (v2's bound on an identity's rate limits). */
const MAX_ROWS = 50;

const DONE = {
  created: "Identity created.",
  saved: "Identity saved.",
  deleted: "Identity deleted; its keys keep working without an identity.",
};

/** A rate-limit row as typed (strings, so that a refused form shows what was typed). */
type RatelimitDraft = { name: string; limit: string; duration: string; autoApply: boolean };
type Draft = { externalId: string; meta: string; ratelimits: RatelimitDraft[] };

const mayIdentity = (ctx: Ctx, action: string) =>
  can(ctx, identityPermission(ctx.caller.access, ctx.caller.workspaceId, ["*", `identity.*.${action}`], action));

const identityPath = (id: string) => `/identities/${encodeURIComponent(id)}`;

function draftOfForm(form: FormFields): Draft {
  const ratelimits: RatelimitDraft[] = [];
  for (let i = 0; i < MAX_ROWS && `rl${i}_name` in form; i++) {
    ratelimits.push({
      name: field(form, `rl${i}_name`),
      limit: field(form, `rl${i}_limit`),
      duration: field(form, `rl${i}_duration`),
      autoApply: field(form, `rl${i}_autoApply`) !== "",
    });
  }
  return { externalId: field(form, "externalId"), meta: field(form, "meta"), ratelimits };
}

function draftOfIdentity(identity: Identity): Draft {
  return {
    externalId: identity.externalId,
    meta: Object.keys(identity.meta).length > 0 ? JSON.stringify(identity.meta, null, 2) : "",
    ratelimits: identity.ratelimits.map((r) => ({
      name: r.name,
      limit: String(r.limit),
      duration: String(r.duration),
      autoApply: r.autoApply,
    })),
  };
}

type RatelimitsInput = z.output<typeof ratelimitsInput>;

/** The rate limits of a form (rows left blank are skipped), read by v2's schema. */
function parseRatelimits(rows: RatelimitDraft[]): Parsed<RatelimitsInput> {
  const given = rows.map((r, i) => ({ r, n: i + 1 })).filter(({ r }) => r.name !== "" || r.limit !== "" || r.duration !== "");
  const parsed: RatelimitsInput = [];
  for (const { r, n } of given) {
    const row = parseWith(
      ratelimitsInput.element,
      { name: r.name, limit: wholeNumber(r.limit), duration: wholeNumber(r.duration), autoApply: r.autoApply },
      "",
    );
    if (!row.ok) {
      // Name the row and the field: "Rate limit 2: duration (ms) must be at least 1000."
      const one = ratelimitsInput.element.shape;
      const name = parseWith(one.name, r.name, "name");
      const limit = parseWith(one.limit, wholeNumber(r.limit), "limit");
      const duration = parseWith(one.duration, wholeNumber(r.duration), "duration (ms)");
      const failed = [name, limit, duration].find((p) => !p.ok) as { ok: false; text: string } | undefined;
      return { ok: false, text: `Rate limit ${n}: ${failed?.text ?? row.text}` };
    }
    parsed.push(row.value);
  }
  return parseWith(ratelimitsInput, parsed, "Rate limits");
}

/** The meta and rate limits of a form, each read by v2's schema. */
function parseMetaAndRatelimits(draft: Draft): Parsed<{ meta: Record<string, unknown> | undefined; ratelimits: RatelimitsInput }> {
  const json = parseMetaJson(draft.meta);
  if (!json.ok) return json;
  const meta = json.value === undefined ? json : parseWith(metaInput, json.value, "Meta");
  if (!meta.ok) return meta;
  const ratelimits = parseRatelimits(draft.ratelimits);
  if (!ratelimits.ok) return ratelimits;
  return { ok: true, value: { meta: meta.value, ratelimits: ratelimits.value } };
}

function RatelimitRows({ rows }: { rows: RatelimitDraft[] }) {
  const all = [...rows, ...Array.from({ length: BLANK_ROWS }, () => ({ name: "", limit: "", duration: "", autoApply: false }))];
  return (
    <>
      <h3>Shared rate limits</h3>
      <p class="hint">
        Every key of the identity counts against these; a row left blank is ignored, and a row cleared removes that limit. Duration in
        milliseconds (1000 to 2592000000).
      </p>
      {all.map((r, i) => (
        <fieldset class="card" key={`rl-${i}`}>
          <legend>{`Rate limit ${i + 1}`}</legend>
          <div class="row">
            <Field id={`rl-${i}-name`} label="Name">
              <input id={`rl-${i}-name`} name={`rl${i}_name`} type="text" value={r.name} maxLength={128} />
            </Field>
            <Field id={`rl-${i}-limit`} label="Limit">
              <input id={`rl-${i}-limit`} name={`rl${i}_limit`} type="number" value={r.limit} min={1} />
            </Field>
            <Field id={`rl-${i}-duration`} label="Duration (ms)">
              <input id={`rl-${i}-duration`} name={`rl${i}_duration`} type="number" value={r.duration} min={1000} />
            </Field>
          </div>
          <label class="check" for={`rl-${i}-auto`}>
            <input id={`rl-${i}-auto`} name={`rl${i}_autoApply`} type="checkbox" value="on" checked={r.autoApply} />
            Apply to every verification of the identity's keys
          </label>
        </fieldset>
      ))}
    </>
  );
}

function MetaField({ value }: { value: string }) {
  return (
    <Field id="meta" label="Meta (JSON object)" hint="Optional; at most 100 properties. Empty: no meta.">
      <textarea id="meta" name="meta">
        {value}
      </textarea>
    </Field>
  );
}

async function listPage(ctx: Ctx, opts: { notice?: Notice; status?: number; draft?: Draft } = {}): Promise<PageAnswer> {
  const cursor = cursorOf(ctx.query.cursor);
  const listed = await attempt(() => listIdentitiesByPage(ctx.deps, ctx.caller, { fromId: cursor, limit: PAGE }));
  const notice = opts.notice ?? (listed.ok ? doneNotice(ctx.query.done, DONE) : error(listed.text));
  const draft = opts.draft ?? { externalId: "", meta: "", ratelimits: [] };
  return {
    status: opts.status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout title="Identities" session={ctx.session} csrf={ctx.csrf} nav="identities" notice={notice}>
        <h2>Identities</h2>
        {listed.ok &&
          (listed.value.identities.length === 0 ? (
            <p class="muted">No identities yet.</p>
          ) : (
            <table>
              <ColumnHeads names={["External id", "Identity id", "Rate limits"]} />
              <tbody>
                {listed.value.identities.map((identity) => (
                  <tr key={identity.id}>
                    <td>
                      <a href={to(identityPath(identity.id))}>{identity.externalId}</a>
                    </td>
                    <td class="mono">{identity.id}</td>
                    <td>{identity.ratelimits.length === 0 ? "none" : identity.ratelimits.map((r) => r.name).join(", ")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        {listed.ok && (
          <NextPage
            href={listed.value.nextId === undefined ? undefined : to(`/identities?cursor=${encodeURIComponent(listed.value.nextId)}`)}
          />
        )}
        {mayIdentity(ctx, "create_identity") && (
          <form method="post" action={to("/identities")} class="card">
            <h2>New identity</h2>
            <Csrf token={ctx.csrf} />
            <Field id="externalId" label="External id" hint="Your id of the user or organisation: letters, digits and _ . - (1 to 255).">
              <input id="externalId" name="externalId" type="text" value={draft.externalId} required maxLength={255} />
            </Field>
            <MetaField value={draft.meta} />
            <RatelimitRows rows={draft.ratelimits} />
            <button type="submit">Create identity</button>
          </form>
        )}
      </Layout>
    ),
  };
}

/** The day starts (UTC) of the last 7 days, today's last. */
function lastSevenDays(now: number): number[] {
  const today = now - (now % DAY_MS);
  return Array.from({ length: 7 }, (_, i) => today - (6 - i) * DAY_MS);
}

/**
 * The identity's verifications of the last 7 days by outcome: analytics.getVerifications (v1's; v2's answers 412)
 * filtered by the identity's externalId, per API of the keys shown (at most CHART_APIS), summed per day. An API the
 * root key may not read is left out, and said so.
 */
async function identityChart(
  ctx: Ctx,
  identity: Identity,
  keys: IdentityKeyRow[],
): Promise<{ x: number[]; series: ChartSeries[]; skipped: number; apis: number }> {
  const now = ctx.deps.clock.now();
  const x = lastSevenDays(now);
  const apiIds = [...new Set(keys.map((k) => k.apiId))].slice(0, CHART_APIS);
  const sums = { valid: x.map(() => 0), rateLimited: x.map(() => 0), usageExceeded: x.map(() => 0), other: x.map(() => 0) };
  let skipped = 0;
  for (const apiId of apiIds) {
    const query: VerificationsQuery = { apiId, externalId: identity.externalId, start: x[0]!, end: now, groupBy: ["day"], order: "asc" };
    const rows = await attempt(() => getVerifications(ctx.deps, ctx.caller, query, planVerifications(query, now)));
    if (!rows.ok) {
      skipped++;
      continue;
    }
    for (const row of rows.value) {
      const i = x.indexOf(row.time ?? -1);
      if (i < 0) continue;
      sums.valid[i]! += row.valid;
      sums.rateLimited[i]! += row.rateLimited;
      sums.usageExceeded[i]! += row.usageExceeded;
      sums.other[i]! += row.total - row.valid - row.rateLimited - row.usageExceeded;
    }
  }
  return {
    x,
    series: [
      { label: "Valid", values: sums.valid },
      { label: "Rate limited", values: sums.rateLimited },
      { label: "Usage exceeded", values: sums.usageExceeded },
      { label: "Other refusals", values: sums.other },
    ],
    skipped,
    apis: apiIds.length,
  };
}

async function detailPage(ctx: Ctx, ref: string, opts: { notice?: Notice; status?: number; draft?: Draft } = {}): Promise<PageAnswer> {
  const found = await attempt(() => getIdentityByRef(ctx.deps, ctx.caller, ref));
  if (!found.ok) return refusedPage(ctx, "identities", "Identity", found, { href: to("/identities"), label: "All identities" });
  const identity = found.value;
  const keys = await attempt(() =>
    listKeysOfIdentity(ctx.deps, ctx.caller, identity.id, { fromId: cursorOf(ctx.query.keys), limit: KEYS_PAGE }),
  );
  const chart = keys.ok ? await identityChart(ctx, identity, keys.value.keys) : undefined;
  const draft = opts.draft ?? draftOfIdentity(identity);
  const path = identityPath(identity.id);
  return {
    status: opts.status ?? 200,
    html: (
      <Layout
        title={`Identity ${identity.externalId}`}
        session={ctx.session}
        csrf={ctx.csrf}
        nav="identities"
        notice={opts.notice ?? doneNotice(ctx.query.done, DONE)}
      >
        <PageLink href={to("/identities")} label="All identities" />
        <h2>Details</h2>
        <dl class="fields">
          <dt>Identity id</dt>
          <dd class="mono">{identity.id}</dd>
          <dt>External id</dt>
          <dd>{identity.externalId}</dd>
          <dt>Meta</dt>
          <dd>{Object.keys(identity.meta).length === 0 ? "none" : <code>{JSON.stringify(identity.meta)}</code>}</dd>
        </dl>
        <h2>Rate limits</h2>
        {identity.ratelimits.length === 0 ? (
          <p class="muted">No shared rate limits.</p>
        ) : (
          <table>
            <ColumnHeads names={["Name", "Limit", "Duration (ms)", "Applied"]} />
            <tbody>
              {identity.ratelimits.map((r) => (
                <tr key={r.name}>
                  <td>{r.name}</td>
                  <td>{r.limit}</td>
                  <td>{r.duration}</td>
                  <td>
                    <Badge on={r.autoApply} yes="to every verification" no="when named" />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <h2>Keys</h2>
        {!keys.ok ? (
          <p class="notice error">{keys.text}</p>
        ) : keys.value.keys.length === 0 ? (
          <p class="muted">No keys belong to this identity.</p>
        ) : (
          <>
            <table>
              <ColumnHeads names={["Key", "Name", "API", "State", "Created"]} />
              <tbody>
                {keys.value.keys.map((k) => (
                  <tr key={k.id}>
                    <td>
                      <a class="mono" href={to(`/keys/${encodeURIComponent(k.id)}`)}>
                        {k.id}
                      </a>
                    </td>
                    <td>{k.name ?? ""}</td>
                    <td>
                      <a class="mono" href={to(`/apis/${encodeURIComponent(k.apiId)}`)}>
                        {k.apiId}
                      </a>
                    </td>
                    <td>
                      <Badge on={k.enabled} yes="enabled" no="disabled" />
                    </td>
                    <td>{when(k.createdAtM)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <NextPage href={keys.value.nextId === undefined ? undefined : to(`${path}?keys=${encodeURIComponent(keys.value.nextId)}`)} />
          </>
        )}
        {chart && chart.apis > 0 && (
          <>
            <h2>Verifications, last 7 days</h2>
            <Chart label="Verifications of the identity's keys per day, by outcome" x={chart.x} series={chart.series} />
            {chart.skipped > 0 && <p class="hint">{`Left out: ${chart.skipped} API(s) this root key may not read (api.*.read_api).`}</p>}
            {keys.ok && keys.value.nextId !== undefined && <p class="hint">Counted over the APIs of the keys on this page.</p>}
          </>
        )}
        {mayIdentity(ctx, "update_identity") && (
          <form method="post" action={to(path)} class="card">
            <h2>Edit</h2>
            <Csrf token={ctx.csrf} />
            <MetaField value={draft.meta} />
            <RatelimitRows rows={draft.ratelimits} />
            <button type="submit">Save identity</button>
          </form>
        )}
        {mayIdentity(ctx, "delete_identity") && (
          <DangerCard action={to(`${path}/delete`)} csrf={ctx.csrf} heading="Delete" button="Delete identity">
            <p>Deletes the identity and its rate limits; its keys keep working without an identity.</p>
          </DangerCard>
        )}
      </Layout>
    ),
  };
}

export const identitiesPages = [
  definePage({ method: "GET", path: "/identities", audience: "rootKey", handler: (ctx) => listPage(ctx) }),
  definePage({
    method: "POST",
    path: "/identities",
    audience: "rootKey",
    handler: async (ctx) => {
      const draft = draftOfForm(ctx.form);
      const externalId = parseWith(externalIdInput, draft.externalId, "External id");
      if (!externalId.ok) return listPage(ctx, { notice: error(externalId.text), status: 400, draft });
      const rest = parseMetaAndRatelimits(draft);
      if (!rest.ok) return listPage(ctx, { notice: error(rest.text), status: 400, draft });
      const created = await attempt(() =>
        createIdentity(
          ctx.deps,
          ctx.caller,
          {
            externalId: externalId.value,
            meta: rest.value.meta,
            ...(rest.value.ratelimits.length > 0 && { ratelimits: rest.value.ratelimits }),
          },
          V2_IDENTITY_RULES,
        ),
      );
      if (!created.ok) return listPage(ctx, { notice: error(created.text), status: created.status, draft });
      return { redirect: `${identityPath(created.value)}?done=created` };
    },
  }),
  definePage({
    method: "GET",
    path: "/identities/:identityId",
    audience: "rootKey",
    handler: (ctx) => detailPage(ctx, paramsOf(ctx, "identityId").identityId),
  }),
  definePage({
    method: "POST",
    path: "/identities/:identityId",
    audience: "rootKey",
    handler: async (ctx) => {
      const ref = paramsOf(ctx, "identityId").identityId;
      const draft = draftOfForm(ctx.form);
      const parsed = parseMetaAndRatelimits(draft);
      if (!parsed.ok) return detailPage(ctx, ref, { notice: error(parsed.text), status: 400, draft });
      const updated = await attempt(() =>
        updateIdentityByRef(
          ctx.deps,
          ctx.caller,
          // An empty meta field clears the meta; the rows are the identity's rate limits, all of them.
          { identity: ref, meta: parsed.value.meta ?? {}, ratelimits: parsed.value.ratelimits },
          V2_IDENTITY_RULES,
        ),
      );
      if (!updated.ok) return detailPage(ctx, ref, { notice: error(updated.text), status: updated.status, draft });
      return { redirect: `${identityPath(updated.value.id)}?done=saved` };
    },
  }),
  definePage({
    method: "POST",
    path: "/identities/:identityId/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const ref = paramsOf(ctx, "identityId").identityId;
      const deleted = await attempt(() => deleteIdentityByRef(ctx.deps, ctx.caller, ref));
      if (!deleted.ok) return detailPage(ctx, ref, { notice: error(deleted.text), status: deleted.status });
      return { redirect: "/identities?done=deleted" };
    },
  }),
];
