import type { z } from "zod";
import type { PageAnswer, PageContext } from "../page.js";
import { Layout, type NavId } from "../layout.js";

/**
 * What the identities, roles/permissions and rate-limit pages share: reading a form field through the very schema v2
 * reads it with (so the console accepts what v2 accepts), worded for a person as "<label> <what is wrong>", and the
 * notice a redirect's `?done=` names.
 */
export type Parsed<T> = { ok: true; value: T } | { ok: false; text: string };

/** One issue of a schema, in words: "must be at least 1000", "must hold only letters, …". */
function issueWords(issue: z.core.$ZodIssue): string {
  if (issue.code === "too_small") {
    const min = Number(issue.minimum);
    if (issue.origin === "string") return min <= 1 ? "must not be empty" : `must be at least ${min} characters`;
    if (issue.origin === "array") return `must have at least ${min}`;
    return `must be at least ${min}`;
  }
  if (issue.code === "too_big") {
    const max = Number(issue.maximum);
    if (issue.origin === "string") return `must be at most ${max} characters`;
    if (issue.origin === "array") return `must have at most ${max}`;
    return `must be at most ${max}`;
  }
  if (issue.code === "invalid_type" && (issue.expected === "int" || issue.expected === "number")) return "must be a whole number";
  return issue.message;
}

/** `value` read by `schema`, or the first issue as "<label> <words>". */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, label: string): Parsed<z.output<S>> {
  const result = schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data };
  const issue = result.error.issues[0]!;
  return { ok: false, text: `${label} ${issueWords(issue)}.` };
}

/** A whole number typed in a form: NaN for anything else (the schema then says "must be a whole number"). */
export function wholeNumber(raw: string): number {
  return /^-?\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
}

/** Meta typed as JSON: a JSON object, or undefined for an empty field. */
export function parseMetaJson(raw: string): Parsed<Record<string, unknown> | undefined> {
  if (raw === "") return { ok: true, value: undefined };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return { ok: false, text: `Meta is not valid JSON: ${(err as Error).message}.` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, text: 'Meta must be a JSON object, such as {"plan": "pro"}.' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/** The notice of a `?done=` a page redirected to after a change, from the page's own words. */
export function doneNotice(done: string | undefined, words: Readonly<Record<string, string>>): { kind: "ok"; text: string } | undefined {
  const text = done === undefined ? undefined : words[done];
  return text === undefined ? undefined : { kind: "ok", text };
}

/** A page that says only why it cannot show what was asked (a missing or foreign id, a refused read). */
export function refusedPage(
  ctx: PageContext<"rootKey">,
  nav: NavId,
  title: string,
  refused: { status: number; text: string },
  back: { href: string; label: string },
): PageAnswer {
  return {
    status: refused.status,
    html: (
      <Layout title={title} session={ctx.session} csrf={ctx.csrf} nav={nav} notice={{ kind: "error", text: refused.text }}>
        <p>
          <a href={back.href}>{back.label}</a>
        </p>
      </Layout>
    ),
  };
}

/** A cursor from the query string, bounded as v2 bounds one (a longer one is ignored). */
export function cursorOf(raw: string | undefined): string | undefined {
  return raw !== undefined && raw !== "" && raw.length <= 1024 ? raw : undefined;
}
