/**
 * Who calls the core: the workspace it acts in and the permissions it holds. A v1 root key (RootKeyAuth) is this
 * shape; a second protocol's caller will be too.
 */
export type Principal = { readonly workspaceId: string; readonly permissions: ReadonlySet<string> };
