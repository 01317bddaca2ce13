import type { PageRoute } from "./page.js";
import { identitiesPages } from "./pages/identities.pages.js";
import { rbacPages } from "./pages/rbac.pages.js";
import { ratelimitsPages } from "./pages/ratelimits.pages.js";
import { overviewPages } from "./pages/overview.pages.js";
import { sessionPages } from "./pages/session.pages.js";

/** Every page of the console, by module (one module per section of the navigation). */
export const consolePages: readonly PageRoute[] = [
  ...sessionPages,
  ...overviewPages,
  ...identitiesPages,
  ...rbacPages,
  ...ratelimitsPages,
] as PageRoute[];
