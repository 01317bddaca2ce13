import type { ComponentChildren } from "preact";
import type { PortalSession } from "../core/portals/portals.sessions.js";
import { portalAssetUrl } from "./assets.js";

/** Where the portal page is served, on the API's listener (the URL portal.createSession answers). */
export const PORTAL_PREFIX = "/portal";

/** A portal path: every link and form action goes through it. */
export const at = (path: string): string => `${PORTAL_PREFIX}${path}`;

export type PortalTab = "keys" | "usage" | "none";

/** The tabs a session's scopes open (upstream's portal: Keys for any keys:* scope, Analytics for analytics:read). */
export function tabsOf(session: PortalSession): { id: Exclude<PortalTab, "none">; path: string; label: string }[] {
  const tabs: { id: Exclude<PortalTab, "none">; path: string; label: string }[] = [];
  if (session.scopes.some((s) => s.startsWith("keys:"))) tabs.push({ id: "keys", path: "/keys", label: "Keys" });
  if (session.scopes.includes("analytics:read")) tabs.push({ id: "usage", path: "/usage", label: "Usage" });
  return tabs;
}

/** The page's heading of a portal: its branding title, else its name. */
export const portalTitle = (session: Pick<PortalSession, "portal">): string => session.portal.title ?? session.portal.name;

/** The URL of the portal's theme sheet (its accent colour), versioned by the portal's last change. */
export const themeUrl = (session: PortalSession): string =>
  at(`/theme/${encodeURIComponent(session.portal.id)}.css?v=${session.portal.updatedAtM ?? 0}`);

/** Where an ended session sends its user back: the return link with `reason=session_expired` (upstream's). */
export function expiredReturnUrl(returnUrl: string): string | undefined {
  try {
    const url = new URL(returnUrl);
    if (url.protocol !== "https:" && url.protocol !== "http:") return undefined;
    url.searchParams.set("reason", "session_expired");
    return url.toString();
  } catch {
    return undefined;
  }
}

/** A return link as given: only http or https (the core checked it when it was stored; checked again here). */
export function safeLink(url: string | null | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? url : undefined;
  } catch {
    return undefined;
  }
}

export type PortalLayoutProps = {
  title: string;
  /** The live session (its branding, tabs, sign-out), or none (an invalid link, an ended session). */
  session: PortalSession | undefined;
  csrf: string;
  tab?: PortalTab;
  /** The return link shown in the header (default: the session's, else its portal's). */
  returnUrl?: string | undefined;
  notice?: { kind: "ok" | "error"; text: string } | undefined;
  children: ComponentChildren;
};

/**
 * Every portal page's frame: the portal's branding (title, logo, its theme sheet for the accent colour), a banner on
 * a preview session, the tabs its scopes open, the return link and sign-out. No inline script or style.
 */
export function PortalLayout({ title, session, csrf, tab = "none", returnUrl, notice, children }: PortalLayoutProps) {
  const brand = session === undefined ? "Customer portal" : portalTitle(session);
  const back = safeLink(returnUrl ?? session?.returnUrl);
  const logo = session?.portal.logoUrl?.startsWith("https://") ? session.portal.logoUrl : undefined;
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · ${brand}`}</title>
        <link rel="stylesheet" href={portalAssetUrl("uplot.css")} />
        <link rel="stylesheet" href={portalAssetUrl("console.css")} />
        <link rel="stylesheet" href={portalAssetUrl("portal.css")} />
        {session?.portal.accentColor && <link rel="stylesheet" href={themeUrl(session)} />}
        <script src={portalAssetUrl("uplot.js")} defer />
        <script src={portalAssetUrl("console.js")} defer />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        {session?.preview && (
          <p class="preview-banner" role="note">
            Preview: this session was made to try the portal out.
          </p>
        )}
        <header class="top">
          <a class="brand" href={at("/")}>
            {logo && <img src={logo} alt="" referrerpolicy="no-referrer" />}
            <span>{brand}</span>
          </a>
          {session !== undefined && (
            <nav aria-label="Sections">
              <ul>
                {tabsOf(session).map((t) => (
                  <li key={t.id}>
                    <a href={at(t.path)} aria-current={t.id === tab ? "page" : undefined}>
                      {t.label}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
          )}
          {back && (
            <a class="return-link" href={back} rel="noreferrer">
              Return to {brand === "Customer portal" ? "the site" : brand}
            </a>
          )}
          {session !== undefined && (
            <form method="post" action={at("/sign-out")} class="signout">
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
