/**
 * The writing half of `keyhaven import --from-unkey`: reads hosted Unkey (unkey.client.ts) list by list, in the
 * order keyhaven's POST /v2/keyhaven.copyFromUnkey processes its sections (APIs, permissions, roles, identities, each
 * --api's keys, each --ratelimit-namespace's overrides), and sends what it read in batches of at most `batchSize`
 * items, `concurrency` requests at once within a list; a list starts once the one before it is confirmed, so a key
 * can name the roles, permissions and identity copied before it.
 *
 * Each batch keyhaven confirms is written to the journal (fromUnkey.journal.ts) before the run counts it; a resumed
 * run skips, unread, every batch the journal confirms. A batch goes with an Idempotency-Key derived from the
 * journal's nonce, the pass and the batch's exact body: sent again after a crash, it is answered from the first
 * request (its counts too), so the totals of a resumed run are exact; changed upstream since, it is a new request.
 * Transient failures of keyhaven (connection errors, timeouts, 408, 409 in progress, 429, 5xx) are retried with the
 * shared backoff (http.ts) up to `attempts`, then the run stops, resumable.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import { backoffDelay, isTransientStatus, postJson } from "../http.js";
import type { Progress } from "../import/import.progress.js";
import { identityProblems, keyProblems } from "./fromUnkey.problems.js";
import type { BatchCounts, CopyJournal, Counts } from "./fromUnkey.journal.js";
import {
  type CopyItem,
  itemId,
  SECTIONS,
  type Section,
  toCopyApi,
  toCopyIdentity,
  toCopyKey,
  toCopyOverride,
  toCopyPermission,
  toCopyRole,
} from "./fromUnkey.map.js";
import { type UnkeyClient, UnkeyDecryptRefused, UnkeyError, type UnkeyPage } from "./unkey.client.js";
import type { UnkeyKey, UnkeyRole } from "../../unkey/unkey.schemas.js";

export const COPY_ROUTE = "keyhaven.copyFromUnkey";

export type Target = { baseUrl: string; rootKey: string; timeoutMs: number; attempts: number; backoffMs: number };

/** keyhaven refused or failed a request: `refused` (a 4xx that will not change), `unavailable`, `malformed`. */
export class TargetError extends Error {
  override readonly name = "TargetError";
  constructor(
    readonly kind: "refused" | "unavailable" | "malformed" | "aborted",
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

const countsSchema = z.object({
  created: z.int().nonnegative(),
  updated: z.int().nonnegative(),
  unchanged: z.int().nonnegative(),
  skipped: z.array(z.object({ id: z.string(), reason: z.string() })),
});
const copyAnswerSchema = z.object({
  data: z.object({
    apis: countsSchema.optional(),
    permissions: countsSchema.optional(),
    roles: countsSchema.optional(),
    identities: countsSchema.optional(),
    overrides: countsSchema.optional(),
    keys: countsSchema.extend({ verifiable: z.int().nonnegative(), pending: z.int().nonnegative() }).optional(),
  }),
});
const statusAnswerSchema = z.object({
  data: z.array(
    z.object({
      apiId: z.string(),
      found: z.boolean(),
      keys: z.int().optional(),
      verifiable: z.int().optional(),
      pending: z.int().optional(),
      adopted: z.int().optional(),
    }),
  ),
});
export type CopyStatus = z.output<typeof statusAnswerSchema>["data"][number];

/** keyhaven's side: POST /v2/<route> with the root key, retried on transient failures, each attempt with its deadline. */
export class KeyhavenTarget {
  constructor(
    private readonly target: Target,
    private readonly signal: AbortSignal,
    private readonly onRetry: (message: string) => void = () => {},
  ) {}

  async copy(body: Record<string, unknown>, idempotencyKey: string): Promise<BatchCounts> {
    const answer = await this.call(COPY_ROUTE, JSON.stringify(body), copyAnswerSchema, idempotencyKey);
    const { keys, ...rest } = answer.data;
    const out: BatchCounts = { ...rest };
    if (keys) {
      const { verifiable, pending, ...counts } = keys;
      out.keys = counts;
      out.verifiable = verifiable;
      out.pending = pending;
    }
    return out;
  }

  async copyStatus(apiIds: string[]): Promise<CopyStatus[]> {
    return (await this.call("keyhaven.getCopyStatus", JSON.stringify({ apiIds }), statusAnswerSchema)).data;
  }

  private async call<T extends z.ZodType>(route: string, json: string, schema: T, idempotencyKey?: string): Promise<z.output<T>> {
    const headers: Record<string, string> = idempotencyKey ? { "idempotency-key": idempotencyKey } : {};
    for (let attempt = 1; ; attempt++) {
      if (this.signal.aborted) throw new TargetError("aborted", `keyhaven ${route}: stopped`);
      const res = await postJson(
        this.target.baseUrl,
        `/v2/${route}`,
        this.target.rootKey,
        json,
        this.target.timeoutMs,
        this.signal,
        headers,
      );
      if (this.signal.aborted) throw new TargetError("aborted", `keyhaven ${route}: stopped`);
      if (res.kind === "ok") {
        const parsed = schema.safeParse(res.body);
        if (parsed.success) return parsed.data;
        const issue = parsed.error.issues[0];
        throw new TargetError(
          "malformed",
          `keyhaven ${route} answered ${res.status} with a body this command does not know (${issue?.path.join(".") ?? ""})`,
        );
      }
      const why = this.redact(res.kind === "network" ? res.message : `${res.status} ${res.code}: ${res.message.slice(0, 500)}`);
      // 409 on this route: a request with the same Idempotency-Key is still being answered (a run killed mid-request).
      const transient = res.kind === "network" || isTransientStatus(res.status) || res.status === 409;
      if (!transient) throw new TargetError("refused", `keyhaven ${route} answered ${why}`, res.status);
      if (attempt >= this.target.attempts) {
        throw new TargetError(
          "unavailable",
          `keyhaven ${route}: ${why} (after ${attempt} attempts)`,
          res.kind === "error" ? res.status : undefined,
        );
      }
      const delayMs = backoffDelay(attempt, this.target.backoffMs, res.kind === "error" ? res.retryAfterMs : undefined);
      this.onRetry(`keyhaven ${route}: ${why}; attempt ${attempt + 1} of ${this.target.attempts} in ${(delayMs / 1000).toFixed(1)} s`);
      await sleep(delayMs, this.signal);
    }
  }

  private redact(text: string): string {
    return text.split(this.target.rootKey).join("[the keyhaven root key]");
  }
}

export type Totals = Record<Section, Omit<Counts, "skipped"> & { skipped: number }> & { verifiable: number; pending: number };
export type SkippedItem = { kind: Section; id: string; reason: string; where: "local" | "keyhaven" };
export type CopyOutcome = {
  totals: Totals;
  skipped: SkippedItem[];
  resumedBatches: number;
  batches: number;
  decryptRefused: { forbidden: string[]; unavailable: string[] };
  stop: { kind: "interrupted" | "unavailable" | "refused"; message: string } | undefined;
};

const KIND: Record<Section, string> = {
  apis: "api",
  permissions: "permission",
  roles: "role",
  identities: "identity",
  keys: "key",
  overrides: "override",
};
export const kindOf = (section: Section) => KIND[section];

type Skip = Counts["skipped"][number];
type Mapped = { item: CopyItem } | { skip: string[]; id: string };

export type CopyOptions = {
  unkey: UnkeyClient;
  target: KeyhavenTarget;
  journal: CopyJournal;
  apiIds: string[];
  namespaces: string[];
  batchSize: number;
  pageSize: number;
  concurrency: number;
  progress: Progress;
  /** Stops the run: no new batch leaves; the ones in flight finish (or are cut by the signal given to the target). */
  stopRequested: () => { kind: "interrupted"; message: string } | undefined;
};

/** Pages of an array already read, cut as Unkey would: the cursor of a page is its first item's id. */
function* arrayPages<T>(items: T[], size: number, idOf: (t: T) => string, from: string | undefined): Generator<UnkeyPage<T>> {
  let i = from === undefined ? 0 : items.findIndex((t) => idOf(t) === from);
  if (i < 0) i = items.length;
  for (; i < items.length; i += size) {
    const next = items[i + size];
    yield { items: items.slice(i, i + size), cursor: i === 0 ? undefined : idOf(items[i]!), nextCursor: next ? idOf(next) : undefined };
  }
  if (items.length === 0 && from === undefined) yield { items: [], cursor: undefined, nextCursor: undefined };
}

async function* toAsync<T>(it: Iterable<T>): AsyncGenerator<T> {
  yield* it;
}

export class CopyRun {
  private stop: CopyOutcome["stop"];
  private readonly inFlight = new Set<Promise<void>>();
  private batches = 0;
  private readonly decryptRefused = { forbidden: [] as string[], unavailable: [] as string[] };
  private decrypt = true;
  /** The lists this run reads (the summary counts their batches only). */
  private readonly streams = new Set<string>();

  constructor(private readonly o: CopyOptions) {}

  async run(): Promise<CopyOutcome> {
    try {
      return await this.runStreams();
    } finally {
      // An Unkey failure ends the reading at once; what was sent before it is still confirmed (or not) and journalled.
      await Promise.allSettled([...this.inFlight]);
    }
  }

  private async runStreams(): Promise<CopyOutcome> {
    const { unkey, apiIds, namespaces } = this.o;
    this.o.progress.start(0);
    // The list of APIs is the --api options: a run naming another set is another list (its APIs are read and sent).
    await this.stream(
      "apis",
      `apis:${apiIds.join(",")}`,
      (from) => this.readApis(from),
      (api) => checked(api.id, toCopyApi(api), [api.name.length < 3 || api.name.length > 256 ? "name: not 3 to 256 characters" : ""]),
    );
    await this.stream(
      "permissions",
      "permissions",
      (from) => unkey.listPermissions({ from }),
      (p) =>
        checked(p.id, toCopyPermission(p), [
          p.name.length < 1 || p.name.length > 512 ? "name: not 1 to 512 characters" : "",
          PERMISSION_SLUG.test(p.slug) ? "" : "slug: not 1 to 128 letters, digits and _ : - . *",
          (p.description?.length ?? 0) > 512 ? "description: longer than 512 characters" : "",
        ]),
    );
    // Roles are read whole even when the journal says they were sent: each key's direct permissions depend on them.
    const roles: UnkeyRole[] = [];
    if (!this.stopped()) for await (const page of unkey.listRoles()) roles.push(...page.items);
    const roleSlugs = new Map(roles.map((r) => [r.name, (r.permissions ?? []).map((p) => p.slug)]));
    await this.stream(
      "roles",
      "roles",
      (from) => toAsync(arrayPages(roles, this.o.pageSize, (r) => r.id, from)),
      (r) =>
        checked(r.id, toCopyRole(r), [
          r.name.length < 1 || r.name.length > 128 ? "name: not 1 to 128 characters" : "",
          (r.description?.length ?? 0) > 512 ? "description: longer than 512 characters" : "",
          (r.permissions?.length ?? 0) > 1000 ? "permissions: more than 1000" : "",
        ]),
    );
    await this.stream(
      "identities",
      "identities",
      (from) => unkey.listIdentities({ from }),
      (identity) => {
        const problems = identityProblems(identity, "").map((r) => r.replace(/^\./, ""));
        return problems.length > 0 ? { skip: problems, id: identity.id } : { item: toCopyIdentity(identity) };
      },
    );
    for (const apiId of apiIds) {
      await this.stream(
        "keys",
        `keys:${apiId}`,
        (from) => this.readKeys(apiId, from),
        (key: UnkeyKey) => {
          const problems = keyProblems(key);
          return problems.length > 0 ? { skip: problems, id: key.keyId } : { item: toCopyKey(key, apiId, roleSlugs) };
        },
      );
    }
    for (const namespace of namespaces) {
      await this.stream(
        "overrides",
        `overrides:${namespace}`,
        (from) => unkey.listOverrides(namespace, { from }),
        (o) => ({ item: toCopyOverride(namespace, o) }),
      );
    }
    this.o.progress.finish();
    return this.outcome();
  }

  private outcome(): CopyOutcome {
    const totals = Object.fromEntries(SECTIONS.map((s) => [s, { created: 0, updated: 0, unchanged: 0, skipped: 0 }])) as unknown as Totals;
    totals.verifiable = 0;
    totals.pending = 0;
    const skipped: SkippedItem[] = [];
    for (const counts of this.o.journal.confirmed(this.streams)) {
      for (const section of SECTIONS) {
        const c = counts[section];
        if (!c) continue;
        totals[section].created += c.created;
        totals[section].updated += c.updated;
        totals[section].unchanged += c.unchanged;
        totals[section].skipped += c.skipped.length;
        for (const s of c.skipped) skipped.push({ kind: section, id: s.id, reason: s.reason, where: s.local ? "local" : "keyhaven" });
      }
      totals.verifiable += counts.verifiable ?? 0;
      totals.pending += counts.pending ?? 0;
    }
    return {
      totals,
      skipped,
      resumedBatches: this.o.journal.resumedBatches,
      batches: this.batches,
      decryptRefused: this.decryptRefused,
      stop: this.stop,
    };
  }

  private stopped(): boolean {
    if (!this.stop) this.stop = this.o.stopRequested();
    return this.stop !== undefined;
  }

  private async *readApis(from: string | undefined): AsyncGenerator<UnkeyPage<{ id: string; name: string }>> {
    if (from !== undefined) return;
    const apis = [];
    for (const apiId of this.o.apiIds) apis.push(await named(apiId, this.o.unkey.getApi(apiId)));
    yield { items: apis, cursor: undefined, nextCursor: undefined };
  }

  /** A key list with plaintexts where Unkey may give them; a refusal of decrypt is noted and the list read without. */
  private async *readKeys(apiId: string, from: string | undefined): AsyncGenerator<UnkeyPage<UnkeyKey>> {
    if (this.decrypt) {
      const pages = this.o.unkey.listKeys(apiId, { decrypt: true, from })[Symbol.asyncIterator]();
      let first: IteratorResult<UnkeyPage<UnkeyKey>>;
      try {
        first = await pages.next();
      } catch (err) {
        if (!(err instanceof UnkeyDecryptRefused)) throw err;
        if (err.reason === "forbidden") this.decrypt = false;
        if (!this.decryptRefused[err.reason].includes(apiId)) this.decryptRefused[err.reason].push(apiId);
        yield* this.o.unkey.listKeys(apiId, { from });
        return;
      }
      if (first.done) return;
      yield first.value;
      for (;;) {
        const r = await pages.next();
        if (r.done) return;
        yield r.value;
      }
    }
    yield* this.o.unkey.listKeys(apiId, { from });
  }

  /**
   * One list: read page by page from the first cursor the journal has not confirmed, cut into batches at page
   * boundaries (at most batchSize items read per batch), each sent once a slot of `concurrency` is free. Resolves
   * when every batch of the list is confirmed, or the run stops.
   */
  private async stream<T>(
    section: Section,
    stream: string,
    pages: (from: string | undefined) => AsyncIterable<UnkeyPage<T>>,
    map: (t: T) => Mapped,
  ): Promise<void> {
    this.streams.add(stream);
    let cursor: string | undefined;
    outer: while (!this.stopped()) {
      const done = this.o.journal.doneAt(stream, cursor ?? "");
      if (done) {
        if (done.next === undefined) break;
        cursor = done.next;
        continue;
      }
      const iterator = pages(cursor)[Symbol.asyncIterator]();
      let batch: { start: string; items: CopyItem[]; skipped: Skip[]; read: number } = {
        start: cursor ?? "",
        items: [],
        skipped: [],
        read: 0,
      };
      for (;;) {
        if (this.stopped()) {
          await iterator.return?.();
          break outer;
        }
        const r = await iterator.next();
        if (r.done) {
          await this.send(section, stream, batch, undefined);
          break outer;
        }
        const page = r.value;
        if (batch.read > 0 && batch.read + page.items.length > this.o.batchSize) {
          // This page opens the next batch: the one so far ends at its cursor.
          await this.send(section, stream, batch, page.cursor);
          batch = { start: page.cursor ?? "", items: [], skipped: [], read: 0 };
        }
        for (const t of page.items) {
          const mapped = map(t);
          if ("item" in mapped) batch.items.push(mapped.item);
          else batch.skipped.push({ id: mapped.id, reason: mapped.skip.join("; "), local: true });
        }
        batch.read += page.items.length;
        if (page.nextCursor === undefined) {
          await this.send(section, stream, batch, undefined);
          break outer;
        }
        if (this.o.journal.doneAt(stream, page.nextCursor)) {
          // An earlier run confirmed the batch starting at the next page (it ran ahead of this one): go there unread.
          await this.send(section, stream, batch, page.nextCursor);
          await iterator.return?.();
          cursor = page.nextCursor;
          continue outer;
        }
      }
    }
    await Promise.all(this.inFlight);
  }

  /** Waits for a free slot, then sends the batch in the background; the journal records it once keyhaven confirmed it. */
  private async send(
    section: Section,
    stream: string,
    batch: { start: string; items: CopyItem[]; skipped: Skip[]; read: number },
    next: string | undefined,
  ): Promise<void> {
    while (this.inFlight.size >= this.o.concurrency) await Promise.race(this.inFlight);
    if (this.stopped()) return;
    // An id twice in one request is a 400 for all of it: a list that moved while it was paged keeps the later copy.
    const byId = new Map<string, CopyItem>();
    for (const item of batch.items) {
      const id = itemId(section, item);
      byId.delete(id);
      byId.set(id, item);
    }
    const { requests, tooLarge } = byBytes(section, [...byId.values()]);
    const skipped = [...batch.skipped, ...tooLarge];
    if (requests.length === 0) {
      const local: BatchCounts = skipped.length > 0 ? { [section]: { created: 0, updated: 0, unchanged: 0, skipped } } : {};
      this.o.journal.record(stream, batch.start, next, batch.read, local);
      return;
    }
    const task = (async () => {
      try {
        // One request per part of COPY_REQUEST_BYTES at most, in order; the batch is confirmed once all are. Each has
        // its own Idempotency-Key: a resumed run rebuilds the same parts from the same page, so a part that landed
        // before a kill is answered from its first request.
        const counts: BatchCounts = {};
        for (const [index, items] of requests.entries()) {
          const body = { [section]: items };
          const idempotencyKey = `khcopy-${createHash("sha256")
            .update(`${this.o.journal.nonce}\n${this.o.journal.pass}\n${stream}\n${batch.start}\n${index}\n`)
            .update(JSON.stringify(body))
            .digest("hex")}`;
          addCounts(counts, await this.o.target.copy(body, idempotencyKey));
        }
        const mine = counts[section] ?? { created: 0, updated: 0, unchanged: 0, skipped: [] };
        counts[section] = { ...mine, skipped: [...mine.skipped, ...skipped] };
        for (const s of SECTIONS) if (s !== section) delete counts[s];
        this.o.journal.record(stream, batch.start, next, batch.read, counts);
        this.batches += 1;
        this.o.progress.advance(batch.read, batch.items.length);
      } catch (err) {
        if (!(err instanceof TargetError)) throw err;
        if (!this.stop) {
          this.stop = {
            kind: err.kind === "refused" || err.kind === "malformed" ? "refused" : err.kind === "aborted" ? "interrupted" : "unavailable",
            message: `${withoutPlaintexts(err.message, batch.items)} (a batch of ${batch.items.length} ${section} of ${stream})`,
          };
        }
      }
    })();
    this.inFlight.add(task);
    void task.finally(() => this.inFlight.delete(task));
  }
}

/**
 * The most bytes of JSON one copy request carries: under the 1 MiB keyhaven.copyFromUnkey reads (its COPY_BODY_LIMIT,
 * the import routes' limit), with room for the envelope.
 */
export const COPY_REQUEST_BYTES = 900 * 1024;

/**
 * A batch's items as the requests that carry them, each at most COPY_REQUEST_BYTES of JSON, in order; an item larger
 * than that alone is skipped with why (keyhaven would refuse its request whole).
 */
export function byBytes(section: Section, items: CopyItem[]): { requests: CopyItem[][]; tooLarge: Skip[] } {
  const requests: CopyItem[][] = [];
  const tooLarge: Skip[] = [];
  const room = COPY_REQUEST_BYTES - 64;
  let current: CopyItem[] = [];
  let size = 0;
  for (const item of items) {
    const bytes = Buffer.byteLength(JSON.stringify(item)) + 1;
    if (bytes > room) {
      tooLarge.push({
        id: itemId(section, item),
        reason: `larger than ${room} bytes as JSON: keyhaven takes 1 MiB per request`,
        local: true,
      });
      continue;
    }
    if (current.length > 0 && size + bytes > room) {
      requests.push(current);
      current = [];
      size = 0;
    }
    current.push(item);
    size += bytes;
  }
  if (current.length > 0) requests.push(current);
  return { requests, tooLarge };
}

/** Adds what one request answered to a batch's counts. */
function addCounts(into: BatchCounts, add: BatchCounts): void {
  for (const section of SECTIONS) {
    const more = add[section];
    if (more === undefined) continue;
    const had = into[section] ?? { created: 0, updated: 0, unchanged: 0, skipped: [] };
    into[section] = {
      created: had.created + more.created,
      updated: had.updated + more.updated,
      unchanged: had.unchanged + more.unchanged,
      skipped: [...had.skipped, ...more.skipped],
    };
  }
  if (add.verifiable !== undefined) into.verifiable = (into.verifiable ?? 0) + add.verifiable;
  if (add.pending !== undefined) into.pending = (into.pending ?? 0) + add.pending;
}

/** Whatever keyhaven's answer quoted, no plaintext of the batch reaches a message. */
function withoutPlaintexts(text: string, items: CopyItem[]): string {
  let out = text;
  for (const item of items) {
    const plaintext = (item as { plaintext?: string }).plaintext;
    if (plaintext) out = out.split(plaintext).join("[a key's plaintext]");
  }
  return out;
}

const PERMISSION_SLUG = /^[a-zA-Z0-9_:\-.*]{1,128}$/;

/**
 * What the route's bounds would refuse (an id not 3 to 255 of [a-zA-Z0-9_], `problems` the caller found) is skipped
 * here rather than making its whole batch a 400.
 */
function checked(id: string, item: CopyItem, problems: string[]): Mapped {
  const all = [/^[a-zA-Z0-9_]{3,255}$/.test(id) ? "" : "id: not 3 to 255 letters, digits and underscores", ...problems].filter(
    (p) => p !== "",
  );
  return all.length === 0 ? { item } : { skip: all, id };
}

async function named<T>(apiId: string, promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (err) {
    if (err instanceof UnkeyError && err.kind === "refused" && err.status === 404) {
      throw new UnkeyError(err.kind, err.route, `--api ${apiId}: Unkey has no such API (${err.message})`, err.info);
    }
    throw err;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
