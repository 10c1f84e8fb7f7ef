// Rendering (contract-engines §3): placeholders with fallbacks, escaped per channel, and for email the
// tracking rewrites (click links, open pixel) and the plain-text part. Pure: no I/O.
import type { Channel } from './rules.ts'
import { PLACEHOLDER } from './variables.ts'

export interface RenderInput {
  channel: Channel
  subject: string | null
  body: string
  /** The send's payload first, then the player's fields (and unsubscribe_url in email). */
  values: Record<string, unknown>
}

export type Rendered = { ok: true; subject: string | null; body: string } | { ok: false; error: string }

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] as string)

/** Values are HTML-escaped where the channel reads HTML (email body, Telegram's parse_mode HTML). */
function escaperFor(channel: Channel, part: 'subject' | 'body'): (s: string) => string {
  if (part === 'body' && (channel === 'email' || channel === 'telegram')) return escapeHtml
  return (s) => s
}

function lookup(values: Record<string, unknown>, name: string): string | undefined {
  let v: unknown = values[name]
  if (v === undefined && name.includes('.')) {
    v = values
    for (const key of name.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined
  }
  if (v === undefined || v === null || v === '') return undefined
  return typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v)
}

function fill(text: string, values: Record<string, unknown>, escape: (s: string) => string): { text: string } | { missing: string } {
  let missing: string | undefined
  const out = text.replace(PLACEHOLDER, (_all, name: string, fallback: string | undefined) => {
    const value = lookup(values, name)
    if (value !== undefined) return escape(value)
    if (fallback !== undefined) return escape(fallback.trim())
    missing ??= name
    return ''
  })
  return missing ? { missing } : { text: out }
}

export function render(input: RenderInput): Rendered {
  let subject: string | null = null
  if (input.subject !== null) {
    const s = fill(input.subject, input.values, escaperFor(input.channel, 'subject'))
    if ('missing' in s) return { ok: false, error: `missing variable: ${s.missing}` }
    subject = s.text
  }
  const b = fill(input.body, input.values, escaperFor(input.channel, 'body'))
  if ('missing' in b) return { ok: false, error: `missing variable: ${b.missing}` }
  return { ok: true, subject, body: b.text }
}

const HREF = /(<a\b[^>]*?\bhref\s*=\s*)(["'])(https?:\/\/[^"']+)\2/gi

/** The http(s) links of an HTML body, in order (a repeated link once), except those `keep` leaves as they are. */
export function linksOf(html: string, keep: (url: string) => boolean = () => false): string[] {
  const out: string[] = []
  for (const m of html.matchAll(HREF)) {
    const url = decodeEntities(m[3] as string)
    if (!keep(url) && !out.includes(url)) out.push(url)
  }
  return out
}

/**
 * Replaces each http(s) link of `html` with `trackedUrl(index)` of its place in linksOf(html, keep);
 * links `keep` accepts (our own unsubscribe link) stay as written.
 */
export function rewriteLinks(html: string, trackedUrl: (index: number) => string, keep: (url: string) => boolean = () => false): string {
  const links = linksOf(html, keep)
  return html.replace(HREF, (all, before: string, quote: string, url: string) => {
    const index = links.indexOf(decodeEntities(url))
    return index < 0 ? all : `${before}${quote}${escapeHtml(trackedUrl(index))}${quote}`
  })
}

/** Adds the open pixel before </body>, or at the end. */
export function addOpenPixel(html: string, pixelUrl: string): string {
  const img = `<img src="${escapeHtml(pixelUrl)}" width="1" height="1" alt="" style="display:none">`
  const at = html.search(/<\/body>/i)
  return at >= 0 ? html.slice(0, at) + img + html.slice(at) : html + img
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' }
/**
 * One pass, so an escaped value (`&amp;#60;`) decodes once, to what was written (`&#60;`), never twice; a
 * numeric reference to no character stays as written (String.fromCodePoint would throw on it).
 */
function decodeEntities(s: string): string {
  return s.replace(/&(?:(amp|lt|gt|quot|apos|nbsp)|#(\d{1,8})|#[xX]([0-9a-fA-F]{1,6}));/g, (all, name?: string, dec?: string, hex?: string) => {
    if (name) return ENTITIES[name] as string
    const cp = dec !== undefined ? Number(dec) : parseInt(hex as string, 16)
    return cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? String.fromCodePoint(cp) : all
  })
}

/** The plain-text part of an HTML email: block ends become line breaks, links keep their address. */
export function htmlToText(html: string): string {
  return decodeEntities(
    html
      .replace(/<(script|style|head)\b[\s\S]*?<\/\1>/gi, '')
      .replace(/<a\b[^>]*?\bhref\s*=\s*(["'])([^"']*)\1[^>]*>([\s\S]*?)<\/a>/gi, (_m, _q, href: string, text: string) => {
        const label = text.replace(/<[^>]+>/g, '').trim()
        return label && label !== href ? `${label} (${href})` : href
      })
      .replace(/<br\s*\/?>/gi, '\n')
      .replace(/<\/(p|div|h[1-6]|li|tr|table)>/gi, '\n')
      .replace(/<li\b[^>]*>/gi, '- ')
      .replace(/<[^>]+>/g, ''),
  )
    .replace(/[ \t]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()
}
