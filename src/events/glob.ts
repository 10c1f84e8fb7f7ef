// Event-type globs for mapping rules: `*` matches any run of characters (also none); every other character
// is itself. Matched without backtracking: a wildcard rule compiled to a regular expression (`*a*a*a*b` →
// /^.*a.*a.*a.*b$/) backtracks polynomially, and one 128-character event type took seconds on the main
// thread, stalling every tenant's ingestion.

/** The most `*` one rule may hold (the admin API refuses more); real rules need one or two. */
export const MAX_GLOB_WILDCARDS = 8

export const wildcardCount = (pattern: string): number => pattern.split('*').length - 1

/**
 * A matcher for `pattern`. Between the wildcards are literal pieces; the first must start the text and the
 * last end it; each middle piece is taken at its leftmost place after the previous one, which is never
 * worse than any later place (whatever a later place leaves, the leftmost leaves more). So each piece is
 * searched once, left to right: O(text length × pieces), no backtracking.
 */
export function compileGlob(pattern: string): (text: string) => boolean {
  const pieces = pattern.split('*')
  if (pieces.length === 1) return (text) => text === pattern
  const first = pieces[0] as string
  const last = pieces[pieces.length - 1] as string
  const middle = pieces.slice(1, -1).filter((p) => p !== '')
  const minLength = first.length + last.length + middle.reduce((n, p) => n + p.length, 0)
  return (text) => {
    if (text.length < minLength || !text.startsWith(first) || !text.endsWith(last)) return false
    let from = first.length
    const end = text.length - last.length
    for (const piece of middle) {
      const at = text.indexOf(piece, from)
      if (at === -1 || at + piece.length > end) return false
      from = at + piece.length
    }
    return true
  }
}
