import { SignInRefusedError } from "../../core/console/console.sessions.js";
import { originOf } from "../../http/origin.js";
import { Layout } from "../layout.js";
import { definePage, field, type PageContext } from "../page.js";
import { PLAIN_COOKIE, SECURE_COOKIE, servedOverHttps } from "../surface.js";

const REFUSED: Record<SignInRefusedError["reason"], { status: number; text: string }> = {
  invalid: { status: 401, text: "That is neither a root key of this store nor the operator token." },
  tooMany: { status: 429, text: "Too many failed sign-ins from your address; wait 15 minutes and try again." },
  workspaceDisabled: { status: 403, text: "That root key's workspace is disabled." },
};

/** Where to go after signing in: a console page named by `next`, never another site. */
function nextOf(next: string | undefined, operator: boolean): string {
  if (next?.startsWith("/console/") && !next.startsWith("/console//") && !next.includes("\\") && !next.startsWith("/console/sign-")) {
    return next.slice("/console".length);
  }
  return operator ? "/operator/workspaces" : "/";
}

function SignInPage({ ctx, error }: { ctx: PageContext<"none">; error?: string }) {
  return (
    <Layout title="Sign in" session={undefined} csrf="" notice={error ? { kind: "error", text: error } : undefined}>
      <form method="post" action="/console/sign-in" class="card narrow">
        <input type="hidden" name="next" value={ctx.query.next ?? field(ctx.form, "next")} />
        <label for="secret">Root key or operator token</label>
        <input id="secret" name="secret" type="password" autocomplete="current-password" required maxLength={4096} />
        <p class="hint">
          A root key acts in its workspace with its permissions; the operator token (KEYHAVEN_ADMIN_TOKEN) manages workspaces. The key stays
          on the server: the browser keeps only a session cookie.
        </p>
        <button type="submit">Sign in</button>
      </form>
    </Layout>
  );
}

export const sessionPages = [
  definePage({
    method: "GET",
    path: "/sign-in",
    audience: "none",
    handler: async (ctx) =>
      ctx.session ? { redirect: nextOf(ctx.query.next, ctx.session.kind === "operator") } : { html: <SignInPage ctx={ctx} /> },
  }),
  definePage({
    method: "POST",
    path: "/sign-in",
    audience: "none",
    handler: async (ctx) => {
      const secret = field(ctx.form, "secret");
      const { deps, req, reply } = ctx;
      if (secret === "" || secret.length > 4096) {
        return { html: <SignInPage ctx={ctx} error="Enter a root key or the operator token." />, status: 400 };
      }
      let signedIn: { token: string; kind: string };
      try {
        signedIn = await deps.consoleSessions.signIn(secret, originOf("console", deps.config.trustProxy, req));
      } catch (err) {
        if (!(err instanceof SignInRefusedError)) throw err;
        const { status, text } = REFUSED[err.reason];
        return { html: <SignInPage ctx={ctx} error={text} />, status };
      }
      const secure = servedOverHttps(req, deps.config.publicUrl);
      reply.setCookie(secure ? SECURE_COOKIE : PLAIN_COOKIE, signedIn.token, {
        path: "/",
        httpOnly: true,
        sameSite: "strict",
        secure,
        maxAge: Math.floor(deps.config.console.absoluteMs / 1000),
      });
      return { redirect: nextOf(field(ctx.form, "next"), signedIn.kind === "operator") };
    },
  }),
  definePage({
    method: "POST",
    path: "/sign-out",
    audience: "session",
    handler: async (ctx) => {
      await ctx.deps.consoleSessions.signOut(ctx.session);
      ctx.reply.clearCookie(SECURE_COOKIE, { path: "/", secure: true });
      ctx.reply.clearCookie(PLAIN_COOKIE, { path: "/" });
      return { redirect: "/sign-in" };
    },
  }),
];
