import { z } from "zod";
import { withAccess } from "../../../core/caller.js";
import { findKeyBySecret, readKeyRatelimits, requireKeyVisible } from "../../../core/keys/keys.read.js";
import { defineV2Rpc } from "../rpc.js";
import { keyResponseData, keyResponseOutput } from "./keys.schemas.js";

export const whoami = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.whoami",
  auth: "rootKey",
  summary:
    "Tells which key a secret is, without verifying it (no credits or rate limits spent; a disabled or expired key is shown as it is). A key of another workspace, or one the root key may not read, is not found.",
  errors: [400, 401, 404, 503],
  returns: "The key (KeyResponseData), without its plaintext.",
  input: z.object({ key: z.string().min(1).max(512).describe("The key's secret.") }).strict(),
  output: keyResponseOutput,
  handler: async (input, { deps, caller }) => {
    const found = await findKeyBySecret(deps, input.key, { permissions: "effective-slugs" });
    // v2 answers a caller without read_key as if the key did not exist; unlike upstream, the 404 names no permission.
    const row = requireKeyVisible(withAccess(caller, { denied: "notFound" }), found);
    return { data: keyResponseData(row, await readKeyRatelimits(deps, row)) };
  },
});
