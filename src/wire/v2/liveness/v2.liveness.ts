import { z } from "zod";
import { defineV2Rpc } from "../rpc.js";

export const liveness = defineV2Rpc({
  method: "GET",
  path: "/v2/liveness",
  auth: "none",
  summary: "Answers 200 while the process is up; needs no authentication and touches no store.",
  errors: [],
  returns: "The process is up.",
  input: z.object({}).strict(),
  output: z.object({ message: z.string() }),
  handler: async () => ({ data: { message: "we're cooking" } }),
});
