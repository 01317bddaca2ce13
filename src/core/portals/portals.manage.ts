import { ConflictError, NotFoundError, PortalRefusedError } from "../../errors.js";
import { newId } from "../../ids.js";
import { findApi } from "../../storage/apis/apis.repository.js";
import type { Db } from "../../storage/client.js";
import { isUniqueViolation } from "../../storage/client.js";
import {
  deletePortal as deletePortalRow,
  findPortal,
  findPortalOfApi,
  insertPortal,
  listPortals as listPortalRows,
  type PortalRow,
  updatePortal as updatePortalRow,
} from "../../storage/portals/portals.repository.js";
import type { Clock } from "../../clock.js";
import type { PermissionQuery } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import { requirePermission } from "../principal.js";

/**
 * Upstream's portal permissions (its rbac, `portal.<portalId|*>.<action>`): creating, reading, updating and deleting
 * portals, and minting their sessions (createSession, portals.sessions.ts). Only these tuples (and `*`) grant them.
 */
export type PortalAction = "create_portal" | "read_portal" | "update_portal" | "delete_portal" | "create_portal_session";
export function portalPermission(action: PortalAction, portalId?: string): PermissionQuery {
  return { or: ["*", `portal.*.${action}`, ...(portalId === undefined ? [] : [`portal.${portalId}.${action}`])] };
}

export type PortalServices = { db: Db; changes: WriteGate; clock: Clock };

/** How a portal looks, with its branding; `returnUrl` is where its page's return link goes when a session names none. */
export type PortalSettings = {
  name: string;
  slug: string;
  returnUrl?: string | null | undefined;
  branding?:
    | { title?: string | null | undefined; accentColor?: string | null | undefined; logoUrl?: string | null | undefined }
    | undefined;
};

/** A slug: 3–64 lowercase letters, digits and hyphens, no hyphen at either end and never two together (upstream's docs). */
export const PORTAL_SLUG = /^(?=.{3,64}$)[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const MAX_PORTAL_NAME = 200;
export const MAX_PORTAL_TITLE = 100;
export const MAX_PORTAL_URL = 500;
export const ACCENT_COLOR = /^#[0-9a-fA-F]{6}$/;

/** An http(s) URL (a return link), or a refusal naming `field`: never `javascript:` or any other scheme a link could run. */
export function checkPortalUrl(field: string, value: string, httpsOnly: boolean): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refused(`${field} must be an absolute URL`);
  }
  if (value.length > MAX_PORTAL_URL) throw refused(`${field} must be at most ${MAX_PORTAL_URL} characters`);
  const schemes = httpsOnly ? ["https:"] : ["https:", "http:"];
  if (!schemes.includes(url.protocol)) throw refused(`${field} must be an ${httpsOnly ? "https" : "http or https"} URL`);
  if (url.username !== "" || url.password !== "") throw refused(`${field} must not carry a user name or password`);
}

function refused(problem: string): PortalRefusedError {
  return new PortalRefusedError({ kind: "portalInputRefused", problem });
}

function checkSettings(s: Partial<PortalSettings>): void {
  if (s.slug !== undefined && !PORTAL_SLUG.test(s.slug)) {
    throw refused("slug must be 3 to 64 lowercase letters, digits and single hyphens, neither first nor last");
  }
  if (s.name !== undefined && (s.name.trim() === "" || s.name.length > MAX_PORTAL_NAME)) {
    throw refused(`name must be 1 to ${MAX_PORTAL_NAME} characters`);
  }
  if (s.returnUrl != null) checkPortalUrl("returnUrl", s.returnUrl, false);
  const b = s.branding;
  if (b?.title != null && (b.title.trim() === "" || b.title.length > MAX_PORTAL_TITLE)) {
    throw refused(`branding.title must be 1 to ${MAX_PORTAL_TITLE} characters`);
  }
  if (b?.accentColor != null && !ACCENT_COLOR.test(b.accentColor)) throw refused("branding.accentColor must be a colour as #rrggbb");
  if (b?.logoUrl != null) checkPortalUrl("branding.logoUrl", b.logoUrl, true);
}

function brandingColumns(b: PortalSettings["branding"]) {
  return {
    ...(b?.title !== undefined && { brandingTitle: b.title }),
    ...(b?.accentColor !== undefined && { accentColor: b.accentColor?.toLowerCase() ?? null }),
    ...(b?.logoUrl !== undefined && { logoUrl: b.logoUrl }),
  };
}

/** A slug or an API taken meanwhile (a unique index refused the write): which, as it now is. */
async function conflictOf(
  db: Db,
  caller: Caller,
  err: unknown,
  slug: string | undefined,
  apiId: string,
  portalId?: string,
): Promise<unknown> {
  if (!isUniqueViolation(err)) return err;
  const ofApi = await findPortalOfApi(db, caller.workspaceId, apiId);
  if (ofApi && ofApi.id !== portalId) return new ConflictError("portal", { kind: "portalOfApiExists", apiId });
  return new ConflictError("portal", { kind: "portalExists", slug: slug ?? "" });
}

/** Creates the portal of an API (one per API): needs create_portal. */
export async function createPortal(
  services: PortalServices,
  caller: Caller,
  input: PortalSettings & { apiId: string },
): Promise<PortalRow> {
  requirePermission(caller, portalPermission("create_portal"));
  checkSettings(input);
  const { db } = services;
  const api = await findApi(db, caller.workspaceId, input.apiId);
  if (!api) throw new NotFoundError("api", input.apiId);
  if (await findPortalOfApi(db, caller.workspaceId, input.apiId)) {
    throw new ConflictError("portal", { kind: "portalOfApiExists", apiId: input.apiId });
  }
  const row = {
    id: newId("pc"),
    workspaceId: caller.workspaceId,
    apiId: input.apiId,
    slug: input.slug,
    name: input.name,
    returnUrl: input.returnUrl ?? null,
    brandingTitle: input.branding?.title ?? null,
    accentColor: input.branding?.accentColor?.toLowerCase() ?? null,
    logoUrl: input.branding?.logoUrl ?? null,
    enabled: true,
    createdAtM: services.clock.now(),
    updatedAtM: null,
  };
  try {
    await services.changes.change(caller, async (tx, record) => {
      await insertPortal(tx, row);
      record({
        event: "portal.create",
        targets: [
          { type: "portal", id: row.id, name: row.slug },
          { type: "api", id: row.apiId },
        ],
        description: `created portal ${row.slug} over API ${row.apiId}`,
      });
    });
  } catch (err) {
    throw await conflictOf(db, caller, err, input.slug, input.apiId);
  }
  return row;
}

/** A portal by id or slug, for a caller that may read it (read_portal on it or on every portal); else not found. */
export async function getPortal(services: { db: Db }, caller: Caller, idOrSlug: string): Promise<PortalRow> {
  const portal = await findPortal(services.db, caller.workspaceId, idOrSlug);
  if (!portal) throw new NotFoundError("portal", idOrSlug, { kind: "portalNotFound" });
  requirePermission(caller, portalPermission("read_portal", portal.id));
  const { storeEncryptedKeys: _omit, ...row } = portal;
  return row;
}

/**
 * The portal of an API (the console's portal tab): undefined when the API has none, told only to a caller that may
 * read every portal or create one; its portal for a caller with read_portal on it. The API must be live (else not
 * found).
 */
export async function getPortalOfApi(services: { db: Db }, caller: Caller, apiId: string): Promise<PortalRow | undefined> {
  if (!(await findApi(services.db, caller.workspaceId, apiId))) throw new NotFoundError("api", apiId);
  const portal = await findPortalOfApi(services.db, caller.workspaceId, apiId);
  if (!portal) {
    requirePermission(caller, { or: ["*", "portal.*.read_portal", "portal.*.create_portal"] });
    return undefined;
  }
  requirePermission(caller, portalPermission("read_portal", portal.id));
  return portal;
}

/** A page of the workspace's portals (optionally an API's), by id; needs read_portal on every portal. */
export async function listPortals(
  services: { db: Db },
  caller: Caller,
  input: { apiId?: string | undefined; cursor?: string | undefined; limit: number },
): Promise<{ portals: PortalRow[]; cursor?: string }> {
  requirePermission(caller, portalPermission("read_portal"));
  const rows = await listPortalRows(services.db, caller.workspaceId, { apiId: input.apiId, fromId: input.cursor, limit: input.limit + 1 });
  const page = rows.slice(0, input.limit);
  return rows.length > input.limit ? { portals: page, cursor: rows[input.limit]!.id } : { portals: page };
}

/** Changes what is given of a portal (null removes an optional setting); needs update_portal. */
export async function updatePortal(
  services: PortalServices,
  caller: Caller,
  input: { portalId: string; enabled?: boolean | undefined } & Partial<PortalSettings>,
): Promise<PortalRow> {
  const portal = await findPortal(services.db, caller.workspaceId, input.portalId);
  requirePermission(caller, portalPermission("update_portal", portal?.id ?? input.portalId));
  if (!portal) throw new NotFoundError("portal", input.portalId, { kind: "portalNotFound" });
  checkSettings(input);
  const set = {
    ...(input.name !== undefined && { name: input.name }),
    ...(input.slug !== undefined && { slug: input.slug }),
    ...(input.returnUrl !== undefined && { returnUrl: input.returnUrl }),
    ...(input.enabled !== undefined && { enabled: input.enabled }),
    ...brandingColumns(input.branding),
  };
  const fields = Object.keys(set);
  // Only a portal's own setting changes it (`branding: {}` names none): nothing else is written or recorded.
  if (fields.length === 0) throw refused("give at least one field to change");
  try {
    return await services.changes.change(caller, async (tx, record) => {
      const row = await updatePortalRow(tx, caller.workspaceId, portal.id, { ...set, updatedAtM: services.clock.now() });
      if (!row) throw new NotFoundError("portal", input.portalId, { kind: "portalNotFound" });
      record({
        event: "portal.update",
        targets: [{ type: "portal", id: row.id, name: row.slug }],
        description: `updated portal ${row.slug}`,
        details: { fields },
      });
      return row;
    });
  } catch (err) {
    throw await conflictOf(services.db, caller, err, input.slug, portal.apiId, portal.id);
  }
}

/** Deletes a portal and every session of it; needs delete_portal. */
export async function deletePortal(services: PortalServices, caller: Caller, portalId: string): Promise<void> {
  const portal = await findPortal(services.db, caller.workspaceId, portalId);
  requirePermission(caller, portalPermission("delete_portal", portal?.id ?? portalId));
  if (!portal) throw new NotFoundError("portal", portalId, { kind: "portalNotFound" });
  await services.changes.change(caller, async (tx, record) => {
    if (!(await deletePortalRow(tx, caller.workspaceId, portal.id)))
      throw new NotFoundError("portal", portalId, { kind: "portalNotFound" });
    record({
      event: "portal.delete",
      targets: [{ type: "portal", id: portal.id, name: portal.slug }],
      description: `deleted portal ${portal.slug} and its sessions`,
    });
  });
}
