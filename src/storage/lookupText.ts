/**
 * Whether PostgreSQL's text can hold `value`: no NUL character and no unpaired UTF-16 surrogate. No row holds text
 * it cannot, so a lookup of such a value finds nothing; the repositories answer it so without sending it (the
 * driver would fail the statement). The JSON body parser lets such text through only in fields that are looked up.
 */
export const isStorableText = (value: string): boolean => !value.includes("\u0000") && value.isWellFormed();
