/** An `ilike … escape '\'` pattern matching text that contains `search`, its `%`, `_` and `\` taken literally. */
export const containsLiteral = (search: string): string => `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
