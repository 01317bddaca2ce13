import type { Services } from "./services.js";

/** Everything a handler may use: the process's services (services.ts), built by main.ts or the test harness. */
export type Deps = Services;
