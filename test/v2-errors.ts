import { expect } from "vitest";
import type { Response } from "./helper.js";

/**
 * A v2 error answer (contract §1.3): the status, `meta.requestId`, and `error` with that status, the type URL of
 * `type` (`unkey/data/api_not_found`, …), a title and, when given, exactly this detail (or one matching it).
 */
export function expectV2Error(res: Response, status: number, type: string, detail?: string | RegExp) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.meta.requestId).toMatch(/^req_/);
  expect(res.body.error.status).toBe(status);
  expect(res.body.error.type).toBe(`https://unkey.com/docs/errors/${type}`);
  expect(typeof res.body.error.title).toBe("string");
  if (detail instanceof RegExp) expect(res.body.error.detail).toMatch(detail);
  else if (detail !== undefined) expect(res.body.error.detail).toBe(detail);
}
