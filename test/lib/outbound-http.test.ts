// The outbound client connects to the checked address only, keeps connections alive and bounded per
// target, cuts the body it keeps at 1 KB, never follows a redirect and times out.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { createOutboundHttp, OutboundTimeoutError } from '../../src/lib/outbound-http.ts'
import { checkUrl } from '../../src/lib/url-policy.ts'

async function receiver(t: { teardown(fn: () => unknown): void }, handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const sockets = new Set<unknown>()
  const server = createServer(handler)
  server.on('connection', (s) => sockets.add(s))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }))
  return { port: (server.address() as AddressInfo).port, sockets }
}

t.test('connects to the pinned address, whatever the name would resolve to now', async (t) => {
  const seen: { host?: string; body: string; path?: string }[] = []
  const { port, sockets } = await receiver(t, (req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      seen.push({ host: req.headers.host, body, path: req.url })
      res.end('x'.repeat(5000))
    })
  })
  // "hooks.invalid" does not exist in DNS: only the pinned lookup can make this connect.
  const target = await checkUrl(`http://hooks.invalid:${port}/in?a=1`, {
    allowPrivate: true,
    resolve: async () => [{ address: '127.0.0.1', family: 4 }],
  })
  const http = createOutboundHttp({ connectionsPerTarget: 2 })
  t.teardown(() => http.close())
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => http.request(target, { body: `{"n":${i}}`, headers: { 'content-type': 'application/json' }, timeoutMs: 5000 })),
  )
  t.ok(results.every((r) => r.status === 200))
  t.equal(results[0]!.bodyPrefix.length, 1024, 'first 1 KB kept')
  t.equal(seen.length, 20)
  t.equal(seen[0]!.host, `hooks.invalid:${port}`, 'Host header names the host as configured')
  t.equal(seen[0]!.path, '/in?a=1')
  t.ok(sockets.size <= 2, `at most 2 connections to the target (${sockets.size})`)
  t.equal(http.pools, 1)
  // Another pool key (another endpoint on the same host) gets connections of its own.
  await http.request(target, { body: '{}', timeoutMs: 5000, poolKey: 'other-endpoint' })
  t.equal(http.pools, 2)
})

t.test('a redirect is returned, not followed; a slow receiver times out', async (t) => {
  let followed = false
  const { port } = await receiver(t, (req, res) => {
    if (req.url === '/redirect') {
      res.writeHead(302, { location: `/elsewhere` })
      res.end()
    } else if (req.url === '/elsewhere') {
      followed = true
      res.end('ok')
    } else {
      setTimeout(() => res.end('late'), 2000)
    }
  })
  const http = createOutboundHttp()
  t.teardown(() => http.close())
  const redirect = await http.request(await checkUrl(`http://127.0.0.1:${port}/redirect`, { allowPrivate: true }), { timeoutMs: 2000 })
  t.equal(redirect.status, 302)
  t.equal(followed, false)
  const started = Date.now()
  await t.rejects(http.request(await checkUrl(`http://127.0.0.1:${port}/slow`, { allowPrivate: true }), { timeoutMs: 200 }), OutboundTimeoutError)
  t.ok(Date.now() - started < 1500, 'aborted at the timeout')
})
