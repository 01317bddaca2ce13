import { z } from "zod";
import {
  createWebhook,
  decodeDeliveryCursor,
  deleteWebhook,
  getWebhook,
  listWebhookDeliveries,
  listWebhooks,
  replayWebhookDelivery,
  WEBHOOK_EVENTS,
  type WebhookEndpoint,
} from "../../core/webhooks/webhooks.core.js";
import { webhookDescription, webhookEvents, webhookUrl } from "../../wire/v2/keyhaven/webhooks.schemas.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, field, fields, type PageAnswer, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
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
  parseWith,
  refusedPage,
  RowAction,
  SecretOnce,
  when,
} from "../ui.js";

type Ctx = PageContext<"rootKey">;

const PAGE = 50;
const DONE = { deleted: "Webhook endpoint deleted." };
const ENDPOINT_DONE = { replayed: "The delivery will be sent again in a moment." };

const webhookPath = (id: string) => `/webhooks/${encodeURIComponent(id)}`;
const webhookIdOf = (ctx: Ctx) => paramsOf(ctx, "webhookId").webhookId;

type Draft = { url: string; events: string[]; description: string };

/** The form's fields read by v2's own schemas, so that the console accepts what createWebhook accepts. */
const createForm = z.object({ url: webhookUrl, events: webhookEvents, description: webhookDescription });
const formLabels: Record<string, string> = { url: "The URL", events: "The events", description: "The description" };

async function webhooksPage(ctx: Ctx, opts: { notice?: Notice; status?: number; draft?: Draft } = {}): Promise<PageAnswer> {
  const listed = await attempt(() => listWebhooks(ctx.deps, ctx.caller));
  const rows: WebhookEndpoint[] = listed.ok ? listed.value : [];
  const notice = opts.notice ?? (listed.ok ? doneNotice(ctx.query.done, DONE) : error(listed.text));
  const draft = opts.draft ?? { url: "", events: [], description: "" };
  const checked = new Set(draft.events);
  return {
    status: opts.status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout title="Webhooks" session={ctx.session} csrf={ctx.csrf} nav="webhooks" notice={notice}>
        <h2>Endpoints</h2>
        {listed.ok &&
          (rows.length === 0 ? (
            <p class="muted">No webhook endpoints yet.</p>
          ) : (
            <table>
              <ColumnHeads names={["URL", "Events", "Description", "State", "Actions"]} />
              <tbody>
                {rows.map((w) => (
                  <tr key={w.id}>
                    <td class="mono">
                      <a href={to(webhookPath(w.id))}>{w.url}</a>
                    </td>
                    <td>{w.events.join(", ")}</td>
                    <td>{w.description ?? ""}</td>
                    <td>
                      <Badge on={w.enabled} yes="enabled" no="disabled" />
                    </td>
                    <td>
                      <RowAction
                        action={to(`${webhookPath(w.id)}/delete`)}
                        csrf={ctx.csrf}
                        text="Delete"
                        label={`Delete webhook endpoint ${w.url}`}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        {listed.ok && (
          <form method="post" action={to("/webhooks")} class="card">
            <h2>New endpoint</h2>
            <Csrf token={ctx.csrf} />
            <Field
              id="url"
              label="URL"
              hint="https (or http), at most 2048 characters; a public host unless KEYHAVEN_WEBHOOK_ALLOW_PRIVATE=true."
            >
              <input id="url" name="url" type="url" value={draft.url} required maxLength={2048} />
            </Field>
            <fieldset>
              <legend>Events</legend>
              {WEBHOOK_EVENTS.map((event) => (
                <label class="check" for={`event-${event}`} key={event}>
                  <input id={`event-${event}`} name="events" type="checkbox" value={event} checked={checked.has(event)} />
                  <span class="mono">{event}</span>
                </label>
              ))}
            </fieldset>
            <Field id="description" label="Description">
              <input id="description" name="description" type="text" value={draft.description} maxLength={512} />
            </Field>
            <button type="submit">Create endpoint</button>
          </form>
        )}
      </Layout>
    ),
  };
}

async function webhookPage(ctx: Ctx, opts: { notice?: Notice; status?: number } = {}): Promise<PageAnswer> {
  const back = { href: to("/webhooks"), label: "All webhook endpoints" };
  const found = await attempt(() => getWebhook(ctx.deps, ctx.caller, webhookIdOf(ctx)));
  if (!found.ok) return refusedPage(ctx, "webhooks", "Webhook endpoint", found, back);
  const w = found.value;
  const raw = cursorOf(ctx.query.cursor);
  const cursor = raw !== undefined && decodeDeliveryCursor(raw) !== undefined ? raw : undefined;
  const page = await attempt(() => listWebhookDeliveries(ctx.deps, ctx.caller, { webhookId: w.id, limit: PAGE, cursor }));
  const path = webhookPath(w.id);
  return {
    status: opts.status ?? (page.ok ? 200 : page.status),
    html: (
      <Layout
        title="Webhook endpoint"
        session={ctx.session}
        csrf={ctx.csrf}
        nav="webhooks"
        notice={opts.notice ?? (page.ok ? doneNotice(ctx.query.done, ENDPOINT_DONE) : error(page.text))}
      >
        <PageLink href={back.href} label={back.label} />
        <h2>Details</h2>
        <dl class="fields">
          <dt>Endpoint id</dt>
          <dd class="mono">{w.id}</dd>
          <dt>URL</dt>
          <dd class="mono">{w.url}</dd>
          <dt>Events</dt>
          <dd>{w.events.join(", ")}</dd>
          <dt>Description</dt>
          <dd>{w.description ?? ""}</dd>
          <dt>State</dt>
          <dd>
            <Badge on={w.enabled} yes="enabled" no="disabled" />
          </dd>
          <dt>Created</dt>
          <dd>{when(w.createdAtM)}</dd>
        </dl>
        <h2>Deliveries</h2>
        {page.ok &&
          (page.value.deliveries.length === 0 ? (
            <p class="muted">Nothing was sent to this endpoint yet.</p>
          ) : (
            <table>
              <ColumnHeads names={["Message id", "Event", "Status", "Attempts", "Last answer", "Created", "Actions"]} />
              <tbody>
                {page.value.deliveries.map((d) => (
                  <tr key={d.id}>
                    <td class="mono">{d.id}</td>
                    <td class="mono">{d.event}</td>
                    <td>
                      {d.status === "pending" && d.nextAttemptAt !== undefined ? `pending (next ${when(d.nextAttemptAt)})` : d.status}
                    </td>
                    <td>{d.attempts}</td>
                    <td>{d.lastResponseCode !== undefined ? String(d.lastResponseCode) : (d.lastError ?? "")}</td>
                    <td>{when(d.createdAt)}</td>
                    <td>
                      <form method="post" action={to(`${path}/deliveries/${encodeURIComponent(d.id)}/replay`)}>
                        <Csrf token={ctx.csrf} />
                        <button type="submit" class="secondary" aria-label={`Send ${d.id} again`}>
                          Replay
                        </button>
                      </form>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        <NextPage
          href={page.ok && page.value.cursor !== undefined ? to(`${path}?cursor=${encodeURIComponent(page.value.cursor)}`) : undefined}
        />
        <DangerCard action={to(`${path}/delete`)} csrf={ctx.csrf} heading="Delete" button="Delete endpoint">
          <p>Deletes the endpoint and its deliveries: nothing pending is sent.</p>
        </DangerCard>
      </Layout>
    ),
  };
}

export const webhooksPages = [
  definePage({
    method: "GET",
    path: "/webhooks",
    audience: "rootKey",
    handler: (ctx) => webhooksPage(ctx),
  }),
  definePage({
    method: "POST",
    path: "/webhooks",
    audience: "rootKey",
    handler: async (ctx) => {
      const draft: Draft = { url: field(ctx.form, "url"), events: fields(ctx.form, "events"), description: field(ctx.form, "description") };
      const parsed = parseWith(createForm, draft, (path) => formLabels[String(path[0])] ?? "A field");
      if (!parsed.ok) return webhooksPage(ctx, { notice: error(parsed.text), status: 400, draft });
      const { url, events, description } = parsed.value;
      const created = await attempt(() =>
        createWebhook(ctx.deps, ctx.caller, { url, events, description: description === "" ? undefined : description }),
      );
      if (!created.ok) return webhooksPage(ctx, { notice: error(created.text), status: created.status, draft });
      const { webhook, secret } = created.value;
      return {
        html: (
          <Layout
            title="New webhook endpoint"
            session={ctx.session}
            csrf={ctx.csrf}
            nav="webhooks"
            notice={{ kind: "ok", text: "Webhook endpoint created." }}
          >
            <SecretOnce id="new-secret" label="Its signing secret:" value={secret} />
            <p>
              Endpoint id <code>{webhook.id}</code>. <a href={to(webhookPath(webhook.id))}>Open the endpoint's page</a>
            </p>
            <PageLink href={to("/webhooks")} label="All webhook endpoints" />
          </Layout>
        ),
      };
    },
  }),
  definePage({ method: "GET", path: "/webhooks/:webhookId", audience: "rootKey", handler: (ctx) => webhookPage(ctx) }),
  definePage({
    method: "POST",
    path: "/webhooks/:webhookId/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const deleted = await attempt(() => deleteWebhook(ctx.deps, ctx.caller, webhookIdOf(ctx)));
      if (!deleted.ok) return webhooksPage(ctx, { notice: error(deleted.text), status: deleted.status });
      return { redirect: "/webhooks?done=deleted" };
    },
  }),
  definePage({
    method: "POST",
    path: "/webhooks/:webhookId/deliveries/:deliveryId/replay",
    audience: "rootKey",
    handler: async (ctx) => {
      const { deliveryId } = paramsOf(ctx, "deliveryId");
      const replayed = await attempt(() => replayWebhookDelivery(ctx.deps, ctx.caller, deliveryId));
      if (!replayed.ok) return webhookPage(ctx, { notice: error(replayed.text), status: replayed.status });
      return { redirect: `${webhookPath(replayed.value.webhookId)}?done=replayed` };
    },
  }),
];
