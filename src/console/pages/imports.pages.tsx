import { listCopyStatus } from "../../core/import/import.copyStatus.js";
import { listMigrations, MAX_LISTED_ERRORS, RETRY_MIGRATION_NEED, readMigration, retryMigration } from "../../core/import/import.status.js";
import { v1StoredError } from "../../wire/v1/errors.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, type PageAnswer, type PageContext } from "../page.js";
import { attempt, can, ColumnHeads, doneNotice, errorNotice, NextPage, type Notice, PageLink, paramsOf, when } from "../ui.js";

/** Migrations and APIs per page of the imports page. */
export const IMPORTS_PAGE = 25;

type Ctx = PageContext<"rootKey">;

const migrationPath = (id: string) => `/imports/${encodeURIComponent(id)}`;

function nextHref(ctx: Ctx, name: "cursor" | "apis", cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const params = new URLSearchParams();
  for (const other of ["cursor", "apis"] as const) if (other !== name && ctx.query[other]) params.set(other, ctx.query[other]);
  params.set(name, cursor);
  return to(`/imports?${params.toString()}`);
}

async function importsPage(ctx: Ctx): Promise<PageAnswer> {
  const migrations = await attempt(() =>
    listMigrations(ctx.deps.db, ctx.caller, { limit: IMPORTS_PAGE, cursor: ctx.query.cursor || undefined }),
  );
  const copies = await attempt(() => listCopyStatus(ctx.deps, ctx.caller, { limit: IMPORTS_PAGE, cursor: ctx.query.apis || undefined }));
  const refused = !migrations.ok ? migrations : !copies.ok ? copies : undefined;
  return {
    status: refused?.status ?? 200,
    html: (
      <Layout title="Imports" session={ctx.session} csrf={ctx.csrf} nav="imports" notice={refused ? errorNotice(refused.text) : undefined}>
        <h2>Enqueued migrations</h2>
        <p class="hint">Batches sent with migrations.enqueueKeys (keyhaven import), by migration id.</p>
        {migrations.ok && (
          <>
            {migrations.value.items.length === 0 ? (
              <p class="muted">No migrations.</p>
            ) : (
              <table>
                <ColumnHeads names={["Migration", "APIs", "Batches pending / done / failed", "Keys enqueued", "Imported", "Failed"]} />
                <tbody>
                  {migrations.value.items.map((m) => (
                    <tr key={m.migrationId}>
                      <td>
                        <a href={to(migrationPath(m.migrationId))}>{m.migrationId}</a>
                      </td>
                      <td class="mono">{m.apiIds.join(" ")}</td>
                      <td>
                        {m.batches.pending} / {m.batches.done} / {m.batches.failed}
                      </td>
                      <td>{m.keys.enqueued}</td>
                      <td>{m.keys.imported}</td>
                      <td>{m.keys.failed}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            <NextPage href={nextHref(ctx, "cursor", migrations.value.cursor)} />
          </>
        )}
        <h2>Copied from Unkey</h2>
        <p class="hint">
          Per API: keys copied without their secret stay pending until a verification through the Unkey fallback adopts them.
        </p>
        {copies.ok && (
          <>
            {copies.value.items.length === 0 ? (
              <p class="muted">No APIs.</p>
            ) : (
              <table>
                <ColumnHeads names={["API", "Keys", "Verifiable", "Pending", "Adopted"]} />
                <tbody>
                  {copies.value.items.map(({ name, status }) => (
                    <tr key={status.apiId}>
                      <td>
                        {name} <span class="mono muted">{status.apiId}</span>
                      </td>
                      <td>{status.found ? status.keys : "gone"}</td>
                      <td>{status.found ? status.verifiable : ""}</td>
                      <td>{status.found ? status.pending : ""}</td>
                      <td>{status.found ? status.adopted : ""}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            <NextPage href={nextHref(ctx, "apis", copies.value.cursor)} />
          </>
        )}
      </Layout>
    ),
  };
}

async function migrationPage(ctx: Ctx, notice?: Notice, status?: number): Promise<PageAnswer> {
  const { migrationId } = paramsOf(ctx, "migrationId");
  const read = await attempt(() => readMigration(ctx.deps.db, ctx.caller, migrationId));
  const n = /^\d{1,9}$/.test(ctx.query.n ?? "") ? ctx.query.n : "the";
  const shown = notice ?? (read.ok ? doneNotice(ctx.query.done, { retried: `Queued again ${n} failed batches.` }) : errorNotice(read.text));
  return {
    status: status ?? (read.ok ? 200 : read.status),
    html: (
      <Layout title={read.ok ? `Migration ${migrationId}` : "Migration"} session={ctx.session} csrf={ctx.csrf} nav="imports" notice={shown}>
        <PageLink href={to("/imports")} label="All imports" />
        {read.ok && (
          <>
            <dl class="fields">
              <dt>Batches</dt>
              <dd>
                {read.value.batches.pending} pending, {read.value.batches.done} done, {read.value.batches.failed} failed
              </dd>
              <dt>Keys</dt>
              <dd>
                {read.value.keys.enqueued} enqueued, {read.value.keys.imported} imported, {read.value.keys.failed} failed
              </dd>
            </dl>
            {read.value.batches.failed > 0 && can(ctx, RETRY_MIGRATION_NEED) && (
              <form method="post" action={to(`${migrationPath(migrationId)}/retry`)} class="actions">
                <Csrf token={ctx.csrf} />
                <button type="submit">Retry failed batches</button>
                <span class="hint">Queues again the batches that failed as a whole, once their cause is fixed.</span>
              </form>
            )}
            <h2>Batches being retried</h2>
            {read.value.retrying.length === 0 ? (
              <p class="muted">None.</p>
            ) : (
              <table>
                <ColumnHeads names={["Batch", "Enqueued", "Attempts", "Last error", "Next attempt"]} />
                <tbody>
                  {read.value.retrying.map((b) => (
                    <tr key={b.batchId}>
                      <td>{b.batchId}</td>
                      <td>{when(b.enqueuedAt)}</td>
                      <td>{b.attempts}</td>
                      <td class="mono">{b.lastError ?? ""}</td>
                      <td>{b.nextAttemptAt === null ? "now" : when(b.nextAttemptAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            <h2>Errors</h2>
            {read.value.errors.length === 0 ? (
              <p class="muted">None.</p>
            ) : (
              <>
                {read.value.keys.failed > read.value.errors.length && (
                  <p class="hint">
                    The first {MAX_LISTED_ERRORS} errors are listed; {read.value.keys.failed} keys failed in all.
                  </p>
                )}
                <table>
                  <ColumnHeads names={["Batch", "Key (index in its batch)", "Code", "Why"]} />
                  <tbody>
                    {read.value.errors.map((e, i) => {
                      const worded = v1StoredError(e);
                      return (
                        <tr key={`${e.batchId}-${e.index ?? "all"}-${i}`}>
                          <td>{e.batchId}</td>
                          <td>{e.index === null ? "the whole batch" : e.index}</td>
                          <td class="mono">{worded.code}</td>
                          <td>{worded.message}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </>
            )}
          </>
        )}
      </Layout>
    ),
  };
}

export const importsPages = [
  definePage({ method: "GET", path: "/imports", audience: "rootKey", handler: (ctx) => importsPage(ctx) }),
  definePage({ method: "GET", path: "/imports/:migrationId", audience: "rootKey", handler: (ctx) => migrationPage(ctx) }),
  definePage({
    method: "POST",
    path: "/imports/:migrationId/retry",
    audience: "rootKey",
    handler: async (ctx) => {
      const { migrationId } = paramsOf(ctx, "migrationId");
      const retried = await attempt(() => retryMigration(ctx.deps, ctx.caller, migrationId));
      if (!retried.ok) return migrationPage(ctx, errorNotice(retried.text), retried.status);
      if (retried.value > 0) ctx.deps.migrationWorker.wake();
      return { redirect: `${migrationPath(migrationId)}?done=retried&n=${retried.value}` };
    },
  }),
];
