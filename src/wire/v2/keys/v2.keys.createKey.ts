import { z } from "zod";
import { KEY_BYTES_MAX, KEY_BYTES_MIN } from "../../../core/apis/apis.bounds.js";
import { createKey as createKeyCore, V2_CREATE_KEY_RULES } from "../../../core/keys/keys.create.js";
import { NotFoundError, PermissionDeniedError } from "../../../errors.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { V2Error } from "../errors.js";
import { externalIdInput, metaInput, ratelimitsInput } from "../identities/identities.schemas.js";
import { v2Id } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";
import { createdKeyOutput, expiresInput, keyPermissionsInput, keyRolesInput, refillInput } from "./keys.schemas.js";

export const createKey = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.createKey",
  auth: "rootKeyCheckedByWrite",
  summary:
    "Creates a key in an API, in v2's format (`prefix_` + base58 of the random bytes), and returns it; the key is shown only here. Everything (identity, credits, rate limits, roles, permissions, encrypted copy) is written in one transaction. A root key that may not create keys in the API is told the API does not exist.",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "The new key, shown only in this answer, and its id.",
  input: z
    .object({
      apiId: v2Id.describe("The API the key is created in."),
      prefix: z
        .string()
        .min(1)
        .max(16)
        .regex(/^[a-zA-Z0-9_]+$/, { error: "must hold only letters, digits and underscores" })
        .optional()
        .describe("Put in front of the key with an underscore. Default: the API's default prefix, else none."),
      name: z.string().min(1).max(255).optional(),
      byteLength: z
        .int()
        .min(KEY_BYTES_MIN)
        .max(KEY_BYTES_MAX)
        .optional()
        .describe("Random bytes in the key. Default: the API's default, else 16."),
      externalId: externalIdInput.optional().describe("Links the key to the workspace's identity with this id, created if needed."),
      meta: metaInput.optional(),
      roles: keyRolesInput.optional(),
      permissions: keyPermissionsInput.optional(),
      expires: expiresInput.optional(),
      credits: z
        .object({
          remaining: z.int().min(0).max(MAX_INT32).nullable().describe("Uses left (0: exhausted); null: unlimited."),
          refill: refillInput.optional(),
        })
        .strict()
        .optional(),
      ratelimits: ratelimitsInput.optional().describe("The key's own named rate limits; of a name given twice, the last wins."),
      enabled: z.boolean().optional().describe("false: the key verifies as DISABLED. Default true."),
      recoverable: z
        .boolean()
        .optional()
        .describe("Also store the key encrypted (needs encrypt_key and an API that stores keys), for getKey's `decrypt`."),
    })
    .strict(),
  output: createdKeyOutput,
  handler: async (input, { deps, caller }) => {
    const { credits, ...settings } = input;
    try {
      const created = await createKeyCore(
        deps,
        caller,
        { ...settings, remaining: credits?.remaining ?? undefined, refill: credits?.refill },
        V2_CREATE_KEY_RULES,
      );
      return { data: created };
    } catch (err) {
      // v2 tells a caller that may not create keys (or encrypt them) in an API that the API does not exist, in the
      // same words as for a missing one, so that the answer does not reveal which APIs exist.
      if (err instanceof PermissionDeniedError || (err instanceof NotFoundError && err.what === "api")) {
        throw new V2Error(404, "unkey/data/api_not_found", "The specified API was not found.");
      }
      throw err;
    }
  },
});
