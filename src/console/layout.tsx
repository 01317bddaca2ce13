import type { ComponentChildren } from "preact";
import type { ConsoleSession } from "../core/console/console.sessions.js";
import { assetUrl } from "./assets.js";

/** Where the console is served, on the API's listener or its own (KEYHAVEN_CONSOLE_PORT). */
export const CONSOLE_PREFIX = "/console";

/** A console path: every link and form action goes through it, so none forgets the prefix. */
export const to = (path: string): string => `${CONSOLE_PREFIX}${path}`;

/** The sections of the navigation, by audience. `id` marks the current one. */
const WORKSPACE_NAV = [
  { id: "overview", path: "/", label: "Overview" },
  { id: "apis", path: "/apis", label: "APIs" },
  { id: "identities", path: "/identities", label: "Identities" },
  { id: "rbac", path: "/roles", label: "Roles & permissions" },
  { id: "ratelimits", path: "/ratelimits", label: "Rate limits" },
  { id: "rootKeys", path: "/root-keys", label: "Root keys" },
  { id: "audit", path: "/audit", label: "Audit log" },
  { id: "webhooks", path: "/webhooks", label: "Webhooks" },
  { id: "imports", path: "/imports", label: "Imports" },
] as const;
const OPERATOR_NAV = [
  { id: "workspaces", path: "/operator/workspaces", label: "Workspaces" },
  { id: "status", path: "/operator/status", label: "Status" },
  { id: "audit", path: "/operator/audit", label: "Audit log" },
] as const;

export type NavId = (typeof WORKSPACE_NAV)[number]["id"] | (typeof OPERATOR_NAV)[number]["id"] | "none";

export type LayoutProps = {
  title: string;
  session: ConsoleSession | undefined;
  csrf: string;
  nav?: NavId;
  /** A one-line message above the content: what a POST did, or why it was refused. */
  notice?: { kind: "ok" | "error"; text: string } | undefined;
  children: ComponentChildren;
};

/** Every page's frame: head (assets only, no inline script or style), navigation, sign-out, the page's content. */
export function Layout({ title, session, csrf, nav = "none", notice, children }: LayoutProps) {
  const items = session === undefined ? [] : session.kind === "operator" ? OPERATOR_NAV : WORKSPACE_NAV;
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · keyhaven`}</title>
        <link rel="stylesheet" href={assetUrl("uplot.css")} />
        <link rel="stylesheet" href={assetUrl("console.css")} />
        <script src={assetUrl("htmx.js")} defer />
        <script src={assetUrl("uplot.js")} defer />
        <script src={assetUrl("console.js")} defer />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href={to(session?.kind === "operator" ? "/operator/workspaces" : "/")}>
            keyhaven
          </a>
          {items.length > 0 && (
            <nav aria-label="Sections">
              <ul>
                {items.map((item) => (
                  <li key={item.id}>
                    <a href={to(item.path)} aria-current={item.id === nav ? "page" : undefined}>
                      {item.label}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
          )}
          {session !== undefined && (
            <form method="post" action={to("/sign-out")} class="signout">
              <span class="who">{session.kind === "operator" ? "operator" : `root key ${session.rootKey.rootKeyId}`}</span>
              <input type="hidden" name="_csrf" value={csrf} />
              <button type="submit">Sign out</button>
            </form>
          )}
        </header>
        <main id="main">
          <h1>{title}</h1>
          {notice && (
            <p class={`notice ${notice.kind}`} role={notice.kind === "error" ? "alert" : "status"}>
              {notice.text}
            </p>
          )}
          {children}
        </main>
      </body>
    </html>
  );
}

/** The hidden field every state-changing form carries (the surface refuses a POST without it). */
export function Csrf({ token }: { token: string }) {
  return <input type="hidden" name="_csrf" value={token} />;
}
