import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { PortalRow } from "../../../storage/portals/portals.repository.js";
import type { Services } from "../../../services.js";

/** Where the portal page is served (the portal surface, under /portal): KEYHAVEN_PUBLIC_URL's, else this request's origin. */
export function portalBaseUrl(deps: Services, req: FastifyRequest): string {
  return `${deps.config.publicUrl ?? `${req.protocol}://${req.host}`}/portal`;
}

export const portalIdInput = z.string().min(1).max(255).describe("The portal's id (`pc_…`) or its slug.");

const nullableText = (max: number) => z.string().min(1).max(max).nullable();

export const brandingInput = z
  .object({
    title: nullableText(100).optional().describe("The portal page's title (default: the portal's name); null removes it."),
    accentColor: z.string().max(7).nullable().optional().describe("The accent colour, as #rrggbb; null removes it."),
    logoUrl: z.string().max(500).nullable().optional().describe("An https URL of the logo shown on the page; null removes it."),
  })
  .strict();

export const portalSettingsInput = {
  slug: z.string().min(1).max(64).describe("3–64 lowercase letters, digits and single hyphens, unique in the workspace."),
  name: z.string().min(1).max(200).describe("What the portal is called on its page and in the console."),
};

export const portalOutput = z.object({
  portalId: z.string(),
  apiId: z.string(),
  slug: z.string(),
  name: z.string(),
  enabled: z.boolean(),
  returnUrl: z.string().optional().describe("The default return link of the portal page."),
  branding: z.object({ title: z.string().optional(), accentColor: z.string().optional(), logoUrl: z.string().optional() }),
  url: z.string().describe("Where the portal page is served; a session's URL adds its exchange code."),
  createdAt: z.int(),
  updatedAt: z.int().optional(),
});

export function portalOut(row: PortalRow, baseUrl: string): z.input<typeof portalOutput> {
  return {
    portalId: row.id,
    apiId: row.apiId,
    slug: row.slug,
    name: row.name,
    enabled: row.enabled,
    ...(row.returnUrl !== null && { returnUrl: row.returnUrl }),
    branding: {
      ...(row.brandingTitle !== null && { title: row.brandingTitle }),
      ...(row.accentColor !== null && { accentColor: row.accentColor }),
      ...(row.logoUrl !== null && { logoUrl: row.logoUrl }),
    },
    url: `${baseUrl}/`,
    createdAt: row.createdAtM,
    ...(row.updatedAtM !== null && { updatedAt: row.updatedAtM }),
  };
}
