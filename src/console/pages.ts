import type { PageRoute } from "./page.js";
import { apisPages } from "./pages/apis.pages.js";
import { auditPages } from "./pages/audit.pages.js";
import { identitiesPages } from "./pages/identities.pages.js";
import { importsPages } from "./pages/imports.pages.js";
import { keysPages } from "./pages/keys.pages.js";
import { operatorPages } from "./pages/operator.pages.js";
import { overviewPages } from "./pages/overview.pages.js";
import { portalsPages } from "./pages/portals.pages.js";
import { ratelimitsPages } from "./pages/ratelimits.pages.js";
import { rbacPages } from "./pages/rbac.pages.js";
import { rootKeysPages } from "./pages/rootKeys.pages.js";
import { sessionPages } from "./pages/session.pages.js";
import { webhooksPages } from "./pages/webhooks.pages.js";

/** Every page of the console, by module (one module per section of the navigation). */
export const consolePages: readonly PageRoute[] = [
  ...sessionPages,
  ...overviewPages,
  ...apisPages,
  ...portalsPages,
  ...keysPages,
  ...identitiesPages,
  ...rbacPages,
  ...ratelimitsPages,
  ...rootKeysPages,
  ...auditPages,
  ...webhooksPages,
  ...importsPages,
  ...operatorPages,
] as PageRoute[];
