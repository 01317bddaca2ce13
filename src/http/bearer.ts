/** The token of an `Authorization: Bearer <token>` header (scheme matched case-insensitively), or "" when absent. */
export function bearerToken(authorization: string | undefined): string {
  return (authorization ?? "").replace(/^\s*bearer\s+/i, "").trim();
}
