import { z } from "zod";
import { defineRpc } from "../rpc.js";

export const liveness = defineRpc({
  method: "GET",
  path: "/v1/liveness",
  auth: "none",
  summary: "Answers 200 while the process is up; needs no authentication and touches no store.",
  errors: [],
  returns: "The process is up.",
  input: z.object({}),
  output: z.object({
    status: z.string(),
    services: z.object({ metrics: z.string(), logger: z.string(), ratelimit: z.string(), usagelimit: z.string() }),
  }),
  handler: async () => ({
    status: "we're so back",
    services: { metrics: "none", logger: "pino", ratelimit: "memory", usagelimit: "postgres" },
  }),
});
