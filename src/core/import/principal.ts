/** The caller of a core operation, as the core sees it: the workspace it acts in and the permissions it holds. */
export type Principal = { readonly workspaceId: string; readonly permissions: ReadonlySet<string> };
