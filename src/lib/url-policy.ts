// The outbound URL policy (contract-engines §2): every URL a tenant configures (webhook URLs, SMTP host,
// Telegram api_base_url, push endpoints) must name a host that resolves only to public unicast
// addresses, so a tenant cannot make Respin call into its own network (SSRF). The host is resolved once
// and the checked address is what the caller connects to (src/lib/outbound-http.ts): no second lookup
// that DNS rebinding could answer differently.
import { lookup as dnsLookup } from 'node:dns/promises'
import { isIP } from 'node:net'

export interface ResolvedAddress {
  address: string
  family: 4 | 6
}

export type Resolver = (host: string) => Promise<ResolvedAddress[]>

export interface UrlPolicyOptions {
  /** WEBHOOK_ALLOW_PRIVATE: any address (and http) is accepted; the host is still resolved and pinned. */
  allowPrivate: boolean
  /** Accepted schemes without the colon (default ['https']; with allowPrivate, 'http' too). */
  schemes?: string[]
  /** DNS resolution (default: the system resolver, all addresses). */
  resolve?: Resolver
}

/** A URL that passed the policy, with the address to connect to. */
export interface CheckedUrl {
  url: URL
  /** The host as written (lowercase, IPv6 without brackets): TLS servername and Host header. */
  host: string
  port: number
  /** The checked address: connect here and nowhere else. */
  address: string
  family: 4 | 6
}

export class UrlPolicyError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UrlPolicyError'
  }
}

/**
 * How long a lookup may take before the check gives up on it. getaddrinfo runs on libuv's thread pool and
 * cannot be cancelled: a name server that never answers still holds that thread until the system's own
 * resolver times out, but the caller (an attempt holding a slot, a 400 waiting for its answer) moves on.
 */
export const DNS_TIMEOUT_MS = 5000

export const systemResolver: Resolver = async (host) => {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`DNS lookup of ${host} took over ${DNS_TIMEOUT_MS} ms`)), DNS_TIMEOUT_MS)
  })
  try {
    const found = await Promise.race([dnsLookup(host, { all: true, verbatim: true }), timeout])
    return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }))
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Checks the URL's form (scheme, no credentials, host written as a name or a canonical IP literal) and
 * throws UrlPolicyError with a sentence a 400 can carry. Does not resolve: use checkUrl for that.
 */
export function parseOutboundUrl(raw: string, opts: Pick<UrlPolicyOptions, 'allowPrivate' | 'schemes'>): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new UrlPolicyError('must be an absolute URL')
  }
  const schemes = opts.schemes ?? (opts.allowPrivate ? ['https', 'http'] : ['https'])
  const scheme = url.protocol.slice(0, -1)
  if (!schemes.includes(scheme)) throw new UrlPolicyError(`must use ${schemes.join(' or ')}`)
  if (url.username || url.password) throw new UrlPolicyError('must not carry credentials')
  if (!url.hostname) throw new UrlPolicyError('must name a host')
  if (opts.allowPrivate) return url
  // The WHATWG parser turns 2130706433, 0x7f.1 and 0177.0.0.1 into 127.0.0.1. Only the plain dotted
  // form is accepted as written: the other notations exist in URLs mainly to slip past filters.
  const written = writtenHost(raw)
  if (isIP(url.hostname) === 4 && written !== url.hostname) {
    throw new UrlPolicyError('IPv4 addresses must be written in dotted decimal (no decimal, octal or hex forms)')
  }
  if (/^[0-9.]+$/.test(written) || /^0x/i.test(written)) {
    // A numeric host the parser did not read as an address ("1.2.3.4.5"): never a real name.
    if (isIP(url.hostname) !== 4) throw new UrlPolicyError('host is not a valid address')
  }
  return url
}

/** The host part of the URL exactly as written, lowercased, without brackets, credentials or port. */
function writtenHost(raw: string): string {
  const afterScheme = raw.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '')
  let authority = afterScheme.split(/[/?#\\]/, 1)[0] ?? ''
  authority = authority.slice(authority.lastIndexOf('@') + 1)
  if (authority.startsWith('[')) return authority.slice(1, authority.indexOf(']')).toLowerCase()
  return authority.replace(/:[0-9]*$/, '').replace(/\.$/, '').toLowerCase()
}

/**
 * The full check: form, then resolution, then every resolved address must be public (unless
 * allowPrivate). Returns the address to connect to. Throws UrlPolicyError.
 */
export async function checkUrl(raw: string, opts: UrlPolicyOptions): Promise<CheckedUrl> {
  const url = parseOutboundUrl(raw, opts)
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : url.protocol === 'http:' ? 80 : 0
  let addresses: ResolvedAddress[]
  const literal = isIP(host)
  if (literal) addresses = [{ address: host, family: literal === 6 ? 6 : 4 }]
  else {
    try {
      addresses = await (opts.resolve ?? systemResolver)(host)
    } catch {
      throw new UrlPolicyError(`host ${host} does not resolve`)
    }
    if (!addresses.length) throw new UrlPolicyError(`host ${host} does not resolve`)
  }
  if (!opts.allowPrivate) {
    for (const a of addresses) {
      const why = refusedAddress(a.address)
      if (why) throw new UrlPolicyError(literal ? `${host} is ${why} address` : `host ${host} resolves to ${why} address ${a.address}`)
    }
  }
  // Prefer IPv4 when the host has both: the common case, and what most receivers test.
  const pinned = addresses.find((a) => a.family === 4) ?? addresses[0]!
  return { url, host, port, address: pinned.address, family: pinned.family }
}

// --- Address classification -----------------------------------------------------------------------------

const IPV4_REFUSED: [string, number, string][] = [
  ['0.0.0.0', 8, 'a "this network" (0.0.0.0/8)'],
  ['10.0.0.0', 8, 'a private (10/8)'],
  ['100.64.0.0', 10, 'a carrier-grade NAT (100.64/10)'],
  ['127.0.0.0', 8, 'a loopback'],
  ['169.254.0.0', 16, 'a link-local'],
  ['172.16.0.0', 12, 'a private (172.16/12)'],
  ['192.0.0.0', 24, 'an IETF protocol (192.0.0/24)'],
  ['192.0.2.0', 24, 'a documentation'],
  ['192.88.99.0', 24, 'a 6to4 relay'],
  ['192.168.0.0', 16, 'a private (192.168/16)'],
  ['198.18.0.0', 15, 'a benchmarking'],
  ['198.51.100.0', 24, 'a documentation'],
  ['203.0.113.0', 24, 'a documentation'],
  ['224.0.0.0', 4, 'a multicast'],
  ['240.0.0.0', 4, 'a reserved'], // includes 255.255.255.255, the broadcast address
]

function ipv4ToInt(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0)
}

const IPV4_RANGES = IPV4_REFUSED.map(([base, bits, label]) => {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
  return { network: (ipv4ToInt(base) & mask) >>> 0, mask, label }
})

function refusedIpv4(n: number): string | null {
  if (n === 0xffffffff) return 'the broadcast'
  for (const r of IPV4_RANGES) if (((n & r.mask) >>> 0) === r.network) return r.label
  return null
}

/** The 8 groups of an IPv6 address (which may end in a dotted IPv4), or null if it is not one. */
export function ipv6Groups(ip: string): number[] | null {
  if (isIP(ip) !== 6) return null
  let text = ip.toLowerCase().replace(/%.*$/, '')
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const n = ipv4ToInt(dotted[1]!)
    text = text.slice(0, -dotted[1]!.length) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined]
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const fill = tail === undefined ? [] : new Array(8 - left.length - right.length).fill('0')
  const groups = [...left, ...fill, ...right].map((g) => parseInt(g, 16))
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : null
}

function refusedIpv6(g: number[]): string | null {
  const embeddedV4 = ((g[6]! << 16) | g[7]!) >>> 0
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  // IPv4-mapped ::ffff:a.b.c.d and the SIIT form ::ffff:0:a.b.c.d: judge the IPv4 address.
  if (zeros(0, 5) && g[5] === 0xffff) return refusedIpv4(embeddedV4)
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return refusedIpv4(embeddedV4)
  // NAT64 well-known prefix 64:ff9b::/96 (reaches the embedded IPv4 address through a translator).
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return refusedIpv4(embeddedV4)
  // Local-use NAT64 64:ff9b:1::/48: operator-defined translation, always internal.
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'a local NAT64'
  if (zeros(0, 8)) return 'the unspecified'
  if (zeros(0, 7) && g[7] === 1) return 'a loopback'
  // Deprecated IPv4-compatible ::a.b.c.d.
  if (zeros(0, 6)) return 'an IPv4-compatible (deprecated)'
  // Only global unicast 2000::/3 is public; fc00::/7 (ULA), fe80::/10 (link-local), fec0::/10, ff00::/8
  // (multicast) and everything unassigned fall outside it.
  if ((g[0]! & 0xe000) !== 0x2000) {
    if ((g[0]! & 0xfe00) === 0xfc00) return 'a unique local (fc00::/7)'
    if ((g[0]! & 0xffc0) === 0xfe80) return 'a link-local'
    if ((g[0]! & 0xff00) === 0xff00) return 'a multicast'
    return 'a reserved'
  }
  // 6to4 2002::/16 embeds an IPv4 address in groups 1-2.
  if (g[0] === 0x2002) return refusedIpv4(((g[1]! << 16) | g[2]!) >>> 0)
  // 2001::/23 IETF protocol assignments (Teredo 2001::/32 hides an IPv4 address, ORCHID, ...).
  if (g[0] === 0x2001 && g[1]! < 0x200) return 'an IETF protocol (2001::/23)'
  if (g[0] === 0x2001 && g[1] === 0xdb8) return 'a documentation'
  if (g[0] === 0x3fff && g[1]! < 0x1000) return 'a documentation'
  return null
}

/** Why an address is not a public unicast address (e.g. "a loopback"), or null when it is public. */
export function refusedAddress(address: string): string | null {
  const kind = isIP(address.replace(/%.*$/, ''))
  if (kind === 4) return refusedIpv4(ipv4ToInt(address))
  if (kind === 6) {
    const groups = ipv6Groups(address)
    return groups ? refusedIpv6(groups) : 'an invalid'
  }
  return 'an invalid'
}

export const isPublicAddress = (address: string): boolean => refusedAddress(address) === null
