import { Layout } from "../layout.js";
import { definePage } from "../page.js";

export const overviewPages = [
  definePage({
    method: "GET",
    path: "/",
    audience: "session",
    handler: async (ctx) => {
      if (ctx.session.kind === "operator") return { redirect: "/operator/workspaces" };
      return {
        html: (
          <Layout title="Overview" session={ctx.session} csrf={ctx.csrf} nav="overview">
            <p>Workspace {ctx.session.rootKey.workspaceId}</p>
          </Layout>
        ),
      };
    },
  }),
];
