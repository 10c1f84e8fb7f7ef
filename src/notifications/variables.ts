// Template variables: the `{{name}}` placeholders of a template's subject and body. Pure: no I/O.

/**
 * `{{name}}`, `{{ name }}`, `{{player.first_name}}`: an identifier, optionally dotted, inside double braces,
 * optionally followed by `| fallback text` (`{{ name | there }}`). Group 1 is the name, group 2 the
 * fallback (undefined without one). Shared with the renderer (render.ts), so both read the same syntax.
 */
export const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*(?:\|([^{}]*))?\}\}/g

/** Distinct placeholder names in order of first appearance, subject before body. */
export function extractVariables(...texts: (string | null | undefined)[]): string[] {
  const out: string[] = []
  for (const text of texts) {
    if (!text) continue
    for (const m of text.matchAll(PLACEHOLDER)) {
      const name = m[1] as string
      if (!out.includes(name)) out.push(name)
    }
  }
  return out
}

/**
 * A template's `variables`: the placeholders found in subject and body, then any declared name not
 * already among them (the union, without duplicates).
 */
export function templateVariables(t: { subject: string | null | undefined; body: string; declared: readonly string[] }): string[] {
  const out = extractVariables(t.subject, t.body)
  for (const name of t.declared) if (!out.includes(name)) out.push(name)
  return out
}
