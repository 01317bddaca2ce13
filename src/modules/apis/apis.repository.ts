import { and, eq, inArray, isNull } from "drizzle-orm";
import type { Db } from "../../db/client.js";
import { apis } from "../../db/schema.js";
import { newId } from "../../ids.js";

export type NewApi = {
  workspaceId: string;
  name: string;
  storeEncryptedKeys?: boolean | undefined;
  defaultPrefix?: string | undefined;
  defaultBytes?: number | undefined;
  deleteProtection?: boolean | undefined;
};

export async function insertApi(db: Db, input: NewApi): Promise<string> {
  const id = newId("api");
  await db.insert(apis).values({
    id,
    workspaceId: input.workspaceId,
    name: input.name,
    storeEncryptedKeys: input.storeEncryptedKeys ?? false,
    defaultPrefix: input.defaultPrefix ?? null,
    defaultBytes: input.defaultBytes ?? null,
    deleteProtection: input.deleteProtection ?? false,
    createdAtM: Date.now(),
  });
  return id;
}

/** The API if it exists, is not deleted and belongs to the workspace; another workspace's API is simply absent. */
export async function findApi(db: Db, workspaceId: string, apiId: string) {
  const [row] = await db
    .select()
    .from(apis)
    .where(and(eq(apis.id, apiId), eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM)))
    .limit(1);
  return row;
}

/** Ids among `apiIds` that are live APIs of the workspace. */
export async function findLiveApiIds(db: Db, workspaceId: string, apiIds: string[]): Promise<Set<string>> {
  if (apiIds.length === 0) return new Set();
  const rows = await db
    .select({ id: apis.id })
    .from(apis)
    .where(and(inArray(apis.id, apiIds), eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM)));
  return new Set(rows.map((r) => r.id));
}
