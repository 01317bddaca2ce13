import { z } from "zod";

/** v2's page fields of a list request (contract §1.9): `limit` 1..100 (default 100) and an opaque `cursor`. */
export const pageInput = {
  limit: z.int().min(1).max(100).optional().describe("Rows per page, 1 to 100 (default 100)."),
  cursor: z.string().max(1024).optional().describe("The `pagination.cursor` of the previous page."),
};

/**
 * v2's page of `rows` read from the cursor on with one row more than `limit`: the cursor of the next page is the
 * first id of that page (inclusive, as v2 reads it), present only when there is one.
 */
export function pageOf<T extends { id: string }>(rows: T[], limit: number) {
  const hasMore = rows.length > limit;
  return { rows: rows.slice(0, limit), pagination: { hasMore, ...(hasMore && { cursor: rows[limit]!.id }) } };
}
