/**
 * The largest value of a PostgreSQL integer column (remaining, amounts, limits): the one bound of them all. A module
 * of its own, free of imports, so that input schemas (which the CLI loads for `--help`) can bound by it without
 * loading drizzle.
 */
export const MAX_INT32 = 2_147_483_647;
