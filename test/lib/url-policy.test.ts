// The SSRF policy of contract-engines §2 over a table of addresses in every notation.
import t from 'tap'
import { checkUrl, refusedAddress, UrlPolicyError, type Resolver } from '../../src/lib/url-policy.ts'

const strict = { allowPrivate: false }

// [url, accepted?] — every range and notation of §2.
const TABLE: [string, boolean][] = [
  ['https://8.8.8.8/hook', true],
  ['https://1.1.1.1:8443/hook', true],
  ['https://[2606:4700:4700::1111]/hook', true],
  ['https://[2001:4860:4860::8888]/hook', true],
  ['https://[::ffff:8.8.8.8]/hook', true], // IPv4-mapped public
  ['https://[64:ff9b::808:808]/hook', true], // NAT64 of 8.8.8.8
  ['http://8.8.8.8/hook', false], // https only
  ['ftp://8.8.8.8/hook', false],
  ['https://user:pw@8.8.8.8/hook', false],
  ['https://127.0.0.1/', false],
  ['https://127.255.255.254/', false],
  ['https://10.1.2.3/', false],
  ['https://172.16.0.1/', false],
  ['https://172.31.255.255/', false],
  ['https://192.168.1.1/', false],
  ['https://100.64.0.1/', false], // CGNAT
  ['https://100.127.255.255/', false],
  ['https://169.254.169.254/latest/meta-data/', false], // cloud metadata
  ['https://0.0.0.0/', false],
  ['https://0.1.2.3/', false],
  ['https://224.0.0.1/', false], // multicast
  ['https://239.255.255.250/', false],
  ['https://255.255.255.255/', false], // broadcast
  ['https://240.0.0.1/', false], // reserved
  ['https://192.0.2.10/', false], // documentation
  ['https://198.18.0.1/', false], // benchmarking
  ['https://2130706433/', false], // decimal 127.0.0.1
  ['https://134744072/', false], // decimal 8.8.8.8: the notation itself is refused
  ['https://0x7f000001/', false], // hex
  ['https://0x7f.0.0.1/', false],
  ['https://0177.0.0.1/', false], // octal
  ['https://017700000001/', false],
  ['https://127.1/', false], // shortened
  ['https://[::1]/', false],
  ['https://[::]/', false],
  ['https://[fc00::1]/', false], // ULA
  ['https://[fd12:3456::1]/', false],
  ['https://[fe80::1]/', false], // link-local
  ['https://[ff02::1]/', false], // multicast
  ['https://[::ffff:127.0.0.1]/', false], // IPv4-mapped loopback
  ['https://[::ffff:7f00:1]/', false],
  ['https://[::ffff:169.254.169.254]/', false],
  ['https://[::ffff:0:a00:1]/', false], // SIIT form of 10.0.0.1
  ['https://[64:ff9b::7f00:1]/', false], // NAT64 of 127.0.0.1
  ['https://[64:ff9b::a9fe:a9fe]/', false], // NAT64 of 169.254.169.254
  ['https://[64:ff9b:1::1]/', false], // local-use NAT64
  ['https://[::127.0.0.1]/', false], // IPv4-compatible
  ['https://[2002:7f00:1::1]/', false], // 6to4 of 127.0.0.1
  ['https://[2001:db8::1]/', false], // documentation
  ['https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', false], // Teredo
  ['https://localhost/', false], // resolves to loopback
  ['not a url', false],
]

t.test(`the policy table (${TABLE.length} URLs)`, async (t) => {
  t.ok(TABLE.length >= 30)
  for (const [url, accepted] of TABLE) {
    const result = await checkUrl(url, strict).then(
      (c) => `accepted ${c.address}`,
      (err: unknown) => {
        if (!(err instanceof UrlPolicyError)) throw err
        return `refused: ${err.message}`
      },
    )
    t.equal(result.startsWith('accepted'), accepted, `${url} → ${result}`)
  }
})

t.test('a hostname is resolved once and every address must be public; the checked one is pinned', async (t) => {
  const dns = (answers: Record<string, string[]>): Resolver => async (host) =>
    (answers[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  const resolve = dns({
    'hooks.example.com': ['93.184.216.34', '2606:2800:220:1::1'],
    'rebind.example.com': ['93.184.216.34', '10.0.0.5'],
    'internal.example.com': ['192.168.0.10'],
    'v6only.example.com': ['fd00::5'],
  })
  const ok = await checkUrl('https://Hooks.Example.com/x?y=1', { ...strict, resolve })
  t.equal(ok.address, '93.184.216.34')
  t.equal(ok.host, 'hooks.example.com')
  t.equal(ok.port, 443)
  for (const host of ['rebind', 'internal', 'v6only', 'nxdomain']) {
    await t.rejects(checkUrl(`https://${host}.example.com/`, { ...strict, resolve }), UrlPolicyError, host)
  }
})

t.test('WEBHOOK_ALLOW_PRIVATE lifts the address rules and allows http', async (t) => {
  const c = await checkUrl('http://127.0.0.1:9999/hook', { allowPrivate: true })
  t.equal(c.address, '127.0.0.1')
  t.equal(c.port, 9999)
  await t.rejects(checkUrl('ftp://127.0.0.1/', { allowPrivate: true }), UrlPolicyError)
})

t.test('refusedAddress names the range', async (t) => {
  t.match(refusedAddress('169.254.169.254'), /link-local/)
  t.match(refusedAddress('::ffff:10.0.0.1'), /private/)
  t.equal(refusedAddress('8.8.4.4'), null)
  t.equal(refusedAddress('2a00:1450:4001:80b::200e'), null)
})
