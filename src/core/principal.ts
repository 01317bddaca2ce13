/**
 * Who calls the core: the workspace it acts in and the permissions it holds, whatever the wire protocol
 * authenticated (v1's RootKeyAuth is this shape).
 */
export type Principal = { readonly workspaceId: string; readonly permissions: ReadonlySet<string> };
