// LIKE/ILIKE patterns from user text. PostgreSQL's default LIKE escape character is the backslash.

/** `%text%` with the LIKE wildcards (`%`, `_`) and the escape character of `text` escaped: a literal substring match. */
export const likeContains = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
