// The planner lives in the core (src/core/import/plan.ts); test/createKeys.test.ts still imports it from here.
export { planImport } from "../../core/import/plan.js";
