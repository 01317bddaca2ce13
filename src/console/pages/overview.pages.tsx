import { getWorkspaceVerifications } from "../../core/analytics/analytics.core.js";
import { listApis } from "../../core/apis/apis.core.js";
import { Layout, to } from "../layout.js";
import { definePage } from "../page.js";
import { attempt, Chart, PageLink } from "../ui.js";
import { ApisTable, outcomeChart } from "./apis.pages.js";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** The overview's ranges (`?range=`): the last 24 hours by hour, the last 7 or 30 UTC days by day. */
const RANGES = {
  "24h": { label: "last 24 hours", granularity: "hour", slices: 24, slice: HOUR_MS },
  "7d": { label: "last 7 days", granularity: "day", slices: 7, slice: DAY_MS },
  "30d": { label: "last 30 days", granularity: "day", slices: 30, slice: DAY_MS },
} as const;
type Range = keyof typeof RANGES;
const RANGE_NAMES = Object.keys(RANGES) as Range[];

/** APIs listed on the overview (the APIs page lists them all). */
const OVERVIEW_APIS = 20;

export const overviewPages = [
  definePage({
    method: "GET",
    path: "/",
    audience: "session",
    handler: async (ctx) => {
      if (ctx.session.kind === "operator") return { redirect: "/operator/workspaces" };
      const session = ctx.session;
      const caller = session.caller;
      const rangeName = (ctx.query.range ?? "7d") as Range;
      if (!RANGE_NAMES.includes(rangeName)) {
        const text = `The range must be one of ${RANGE_NAMES.join(", ")}.`;
        return {
          html: (
            <Layout title="Overview" session={session} csrf={ctx.csrf} nav="overview" notice={{ kind: "error", text }}>
              <PageLink href={to("/")} label="Back to the overview" />
            </Layout>
          ),
          status: 400,
        };
      }
      const range = RANGES[rangeName];
      const now = ctx.deps.clock.now();
      // Whole slices up to the end of the current one, so the chart has exactly `slices` points, the current last.
      const end = now - (now % range.slice) + range.slice;
      const start = end - range.slices * range.slice;
      const [verifications, apis] = await Promise.all([
        attempt(() => getWorkspaceVerifications(ctx.deps, caller, { start, end, granularity: range.granularity })),
        attempt(() => listApis(ctx.deps, caller, { limit: OVERVIEW_APIS })),
      ]);
      return {
        html: (
          <Layout title="Overview" session={session} csrf={ctx.csrf} nav="overview">
            <p>
              Workspace <span class="mono">{session.rootKey.workspaceId}</span>
            </p>
            <h2>Verifications, {range.label}</h2>
            <nav class="actions" aria-label="Range">
              {RANGE_NAMES.map((name) => (
                <a key={name} href={to(`/?range=${name}`)} aria-current={name === rangeName ? "true" : undefined}>
                  {RANGES[name].label}
                </a>
              ))}
            </nav>
            {verifications.ok ? (
              <Chart label={`Verifications by outcome, ${range.label}`} {...outcomeChart(verifications.value)} />
            ) : (
              <p>{verifications.text}</p>
            )}
            <h2>APIs</h2>
            {apis.ok ? <ApisTable apis={apis.value.apis} /> : <p>{apis.text}</p>}
            <PageLink href={to("/apis")} label="All APIs" />
          </Layout>
        ),
      };
    },
  }),
];
