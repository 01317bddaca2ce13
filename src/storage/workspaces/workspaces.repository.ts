import { asc, eq, gt } from "drizzle-orm";
import type { Db } from "../client.js";
import { settings, workspaces } from "../schema.js";
import { newId } from "../../ids.js";

const DEFAULT_WORKSPACE = "default_workspace_id";

export async function insertWorkspace(db: Db, name: string, now: number): Promise<string> {
  const id = newId("ws");
  await db.insert(workspaces).values({ id, name, createdAtM: now });
  return id;
}

/** Returns false when no such workspace exists. */
export async function setWorkspaceEnabled(db: Db, id: string, enabled: boolean, now: number): Promise<boolean> {
  const rows = await db.update(workspaces).set({ enabled, updatedAtM: now }).where(eq(workspaces.id, id)).returning({ id: workspaces.id });
  return rows.length > 0;
}

export async function workspaceExists(db: Db, id: string): Promise<boolean> {
  const rows = await db.select({ id: workspaces.id }).from(workspaces).where(eq(workspaces.id, id)).limit(1);
  return rows.length > 0;
}

export async function findDefaultWorkspaceId(db: Db): Promise<string | undefined> {
  const [row] = await db.select().from(settings).where(eq(settings.name, DEFAULT_WORKSPACE)).limit(1);
  return row?.value;
}

export async function setDefaultWorkspaceId(db: Db, id: string): Promise<void> {
  await db
    .insert(settings)
    .values({ name: DEFAULT_WORKSPACE, value: id })
    .onConflictDoUpdate({ target: settings.name, set: { value: id } });
}

/** Up to `limit` workspaces in id order, after the id `after` (a page of the operator's list). */
export async function listWorkspacesPage(db: Db, limit: number, after: string | undefined) {
  return db
    .select({ id: workspaces.id, name: workspaces.name, enabled: workspaces.enabled, createdAtM: workspaces.createdAtM })
    .from(workspaces)
    .where(after === undefined ? undefined : gt(workspaces.id, after))
    .orderBy(asc(workspaces.id))
    .limit(limit);
}

/** One workspace (id, name, enabled, creation time), or undefined. */
export async function findWorkspace(db: Db, id: string) {
  const [row] = await db
    .select({ id: workspaces.id, name: workspaces.name, enabled: workspaces.enabled, createdAtM: workspaces.createdAtM })
    .from(workspaces)
    .where(eq(workspaces.id, id))
    .limit(1);
  return row;
}
