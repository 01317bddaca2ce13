import { z } from "zod";
import { type UpdateKeyCommand, updateKey as updateKeyCore, V2_UPDATE_KEY_RULES } from "../../../core/keys/keys.update.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { externalIdInput, metaInput, ratelimitsInput } from "../identities/identities.schemas.js";
import { v2Id } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";
import { expiresInput, keyPermissionsInput, keyRolesInput, refillInput } from "./keys.schemas.js";

export const updateKeyInput = z
  .object({
    keyId: v2Id.describe("The key to update."),
    name: z.string().min(1).max(255).nullable().optional(),
    externalId: externalIdInput
      .nullable()
      .optional()
      .describe("Links the key to the identity with this id (created if needed); null unlinks it (the identity stays)."),
    meta: metaInput.nullable().optional(),
    expires: expiresInput.nullable().optional().describe("Unix milliseconds; null: never expires."),
    credits: z
      .object({
        remaining: z.int().min(0).max(MAX_INT32).nullable().optional().describe("Uses left; null: unlimited (and no refill)."),
        refill: refillInput.nullable().optional().describe("null removes the refill."),
      })
      .strict()
      .nullable()
      .optional()
      .describe("null: unlimited, without refill."),
    enabled: z.boolean().optional(),
    ratelimits: ratelimitsInput
      .optional()
      .describe("Replaces the key's own rate limits by name: others are deleted, same names updated in place, new ones added."),
    roles: keyRolesInput.optional().describe("Replaces the key's roles; each must exist."),
    permissions: keyPermissionsInput.optional().describe("Replaces the key's direct permissions; missing ones are created."),
  })
  .strict();

export const updateKey = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.updateKey",
  auth: "rootKeyCheckedByWrite",
  summary:
    "Updates a key, all or nothing: a field left out stays as it is, null clears it. `ratelimits`, `roles` and `permissions` replace the key's own; they need update_key alone. The very next verification, through v1 or v2, sees the change.",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing (an empty object).",
  input: updateKeyInput,
  output: z.object({}).strict(),
  handler: async (body, { deps, caller }) => {
    await updateKeyCore(deps, caller, updateKeyCommand(body), V2_UPDATE_KEY_RULES);
    return { data: {} };
  },
});

/** v2's request as the core's command: `credits` (three-state, nested) becomes remaining and refill. */
export function updateKeyCommand(body: z.output<typeof updateKeyInput>): UpdateKeyCommand {
  const { credits, roles, permissions, ...rest } = body;
  const command: UpdateKeyCommand = {
    ...rest,
    // v2 creates a missing permission and refuses a missing role (the core words it as v2's 404).
    roles: roles?.map((name) => ({ name, create: false })),
    permissions: permissions?.map((name) => ({ name, create: true })),
  };
  if (credits === null || credits?.remaining === null) {
    // Unlimited credits have nothing to refill.
    command.remaining = null;
    command.refill = null;
  } else if (credits) {
    command.remaining = credits.remaining;
    command.refill = credits.refill;
  }
  return command;
}
