// Every request gets an HTTP answer (issue 17, docs/http.md): each case a client library would never send,
// byte for byte over a raw socket, against the default engine (node:http under Respin's router).
import Type from 'typebox'
import t from 'tap'
import { definePublicRoute } from '../../src/http/route.ts'
import { MAX_HEAD_BYTES, MAX_HEADER_LINES } from '../../src/http/node-server.ts'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { startHarness } from '../helpers/harness.ts'
import { parseResponses, rawRequest, segments } from '../helpers/raw-http.ts'

/** Answers with the number of body bytes it received, so an upload is seen arriving whole. */
const bodyLength = definePublicRoute({
  method: 'POST', path: '/_test/body-length', operationId: 'testBodyLength', tags: ['test'], summary: 'body length',
  responses: { 200: Type.Object({ bytes: Type.Integer() }) },
  handler: (_ctx, req) => ({ bytes: req.rawBody?.length ?? 0 }),
})

const BODY_TIMEOUT_MS = 1000
const HEADERS_TIMEOUT_MS = 2000
// The HTTP layer's own behaviour: the same whatever stores run.
const h = embeddedRunOnly.skip ? (undefined as never) : await startHarness(t, {
  env: { HTTP_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS), HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS) },
  extraRoutes: [bodyLength],
})
const port = embeddedRunOnly.skip ? 0 : h.app.port
const health = (extra = '') => `GET /api/v1/health HTTP/1.1\r\nHost: respin\r\n${extra}\r\n`
const errorBody = (text: string) => JSON.parse(parseResponses(text)[0]?.body ?? 'null')

t.test('HTTP/1.0 is served, and the connection closes after the answer as 1.0 expects', embeddedRunOnly, async (t) => {
  const res = await rawRequest(port, ['GET /api/v1/health HTTP/1.0\r\n\r\n'])
  t.same(res.statuses, [200])
  t.ok(res.closedByServer)
  t.match(errorBody(res.text), { status: 'ok' })
})

t.test('a 4,145-byte head in 1,460-byte segments is served, and so is a 16 KB one', embeddedRunOnly, async (t) => {
  for (const total of [4145, MAX_HEAD_BYTES - 200]) {
    const filler = total - health().length - 'cookie: \r\n'.length
    const head = health(`cookie: ${'c'.repeat(filler)}\r\n`)
    t.equal(head.length, total)
    const res = await rawRequest(port, segments(head, 1460), { gapMs: 5, responses: 1 })
    t.same(res.statuses, [200], `${total}-byte head`)
  }
})

t.test('a head over 16 KB gets 431 in the error shape, in one read or many', embeddedRunOnly, async (t) => {
  const head = health(`cookie: ${'c'.repeat(MAX_HEAD_BYTES)}\r\n`)
  for (const parts of [[head], segments(head, 1460)]) {
    const res = await rawRequest(port, parts, { gapMs: 2 })
    t.same(res.statuses, [431])
    t.match(errorBody(res.text), { code: 'HEADERS_TOO_LARGE', request_id: String })
    t.ok(res.closedByServer)
  }
})

t.test('too many header lines get 431; as many as allowed are served', embeddedRunOnly, async (t) => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}: v\r\n`).join('')
  const ok = await rawRequest(port, [health(lines(MAX_HEADER_LINES - 1))], { responses: 1 })
  t.same(ok.statuses, [200], `${MAX_HEADER_LINES} lines with Host`)
  const tooMany = await rawRequest(port, [health(lines(MAX_HEADER_LINES + 50))])
  t.same(tooMany.statuses, [431])
  t.match(errorBody(tooMany.text), { code: 'HEADERS_TOO_LARGE' })
})

t.test('pipelined requests, the first answered asynchronously, are all answered in order', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  // The admin route authenticates asynchronously; a first-seen key is looked up in the database.
  const requests = [
    `GET /api/v1/admin/tenants HTTP/1.1\r\nHost: respin\r\nx-api-key: ${h.adminKey}\r\nx-request-id: first\r\n\r\n`,
    `GET /api/v1/players?limit=1 HTTP/1.1\r\nHost: respin\r\nx-api-key: ${tenant.key}\r\nx-request-id: second\r\n\r\n`,
    `GET /api/v1/health HTTP/1.1\r\nHost: respin\r\nx-request-id: third\r\n\r\n`,
  ]
  const res = await rawRequest(port, [requests.join('')], { responses: 3 })
  const answers = parseResponses(res.text)
  t.same(answers.map((a) => a.status), [200, 200, 200])
  t.same(answers.map((a) => a.headers['x-request-id']), ['first', 'second', 'third'])
})

t.test('malformed requests get 400 in the error shape', embeddedRunOnly, async (t) => {
  const cases: Record<string, string> = {
    'no Host in HTTP/1.1': 'GET /api/v1/health HTTP/1.1\r\n\r\n',
    'a lower-case method': 'get /api/v1/health HTTP/1.1\r\nHost: respin\r\n\r\n',
    'a header line without a colon': 'GET /api/v1/health HTTP/1.1\r\nHost: respin\r\nnonsense\r\n\r\n',
    'an unknown HTTP version': 'GET /api/v1/health HTTP/3.7\r\nHost: respin\r\n\r\n',
    'both Content-Length and chunked': 'POST /api/v1/_test/body-length HTTP/1.1\r\nHost: respin\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
  }
  for (const [name, request] of Object.entries(cases)) {
    const res = await rawRequest(port, [request])
    t.same(res.statuses, [400], name)
    t.match(errorBody(res.text), { code: 'BAD_REQUEST', error: String, request_id: String }, name)
  }
})

t.test('forms a server must accept are served: absolute-form target, leading empty line, chunk extensions', embeddedRunOnly, async (t) => {
  const absolute = await rawRequest(port, [`GET http://respin/api/v1/health HTTP/1.1\r\nHost: respin\r\n\r\n`], { responses: 1 })
  t.same(absolute.statuses, [200], 'absolute-form')
  const leading = await rawRequest(port, [`\r\n${health()}`], { responses: 1 })
  t.same(leading.statuses, [200], 'leading CRLF')
  const chunked = await rawRequest(
    port,
    ['POST /api/v1/_test/body-length HTTP/1.1\r\nHost: respin\r\nTransfer-Encoding: chunked\r\n\r\n3;name=value\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n'],
    { responses: 1 },
  )
  t.same(chunked.statuses, [200], 'chunk extensions')
  t.same(errorBody(chunked.text), { bytes: 5 })
})

t.test('a Content-Length of 4 GiB or more gets 413 at once and the connection closes', embeddedRunOnly, async (t) => {
  for (const length of ['4294967296', '99999999999999']) {
    const res = await rawRequest(port, [`POST /api/v1/_test/body-length HTTP/1.1\r\nHost: respin\r\nContent-Length: ${length}\r\n\r\nabc`])
    t.same(res.statuses, [413], length)
    t.match(errorBody(res.text), { code: 'PAYLOAD_TOO_LARGE' })
    t.ok(res.closedByServer)
  }
})

t.test('a stalled body gets 408 after the body timeout, and the connection closes', embeddedRunOnly, async (t) => {
  const res = await rawRequest(port, ['POST /api/v1/_test/body-length HTTP/1.1\r\nHost: respin\r\nContent-Length: 100\r\n\r\n0123456789'], {
    waitMs: BODY_TIMEOUT_MS * 5,
  })
  t.same(res.statuses, [408])
  t.match(errorBody(res.text), { code: 'REQUEST_TIMEOUT' })
  t.ok(res.closedByServer)
  t.ok((res.closedAfterMs ?? Infinity) >= BODY_TIMEOUT_MS, `closed after ${res.closedAfterMs} ms`)
})

t.test('a slow but steady upload taking 4× the body timeout finishes and is answered', embeddedRunOnly, async (t) => {
  // 64 KB in 16 chunks of 4 KB, one every quarter of the body timeout: 4 s in all against a 1 s timeout.
  // Same mechanism as 1 MB at 16 KB/s against the default 10 s (docs/http.md): the timeout measures pauses.
  const chunk = 'x'.repeat(4096)
  const parts = [`POST /api/v1/_test/body-length HTTP/1.1\r\nHost: respin\r\nContent-Length: ${16 * 4096}\r\n\r\n`, ...Array(16).fill(chunk)]
  const res = await rawRequest(port, parts, { gapMs: BODY_TIMEOUT_MS / 4, waitMs: BODY_TIMEOUT_MS * 10, responses: 1 })
  t.same(res.statuses, [200])
  t.same(errorBody(res.text), { bytes: 16 * 4096 })
})

t.test('slowloris connections are answered 408 and closed after the head timeout, while others are served', embeddedRunOnly, async (t) => {
  const slow = Array.from({ length: 100 }, () =>
    rawRequest(port, ['GET /api/v1/health HTTP/1.1\r\n', ...Array.from({ length: 40 }, (_, i) => `x-slow-${i}: 1\r\n`)], {
      gapMs: 200,
      waitMs: HEADERS_TIMEOUT_MS * 4,
    }),
  )
  const served = await h.request('GET', '/health')
  t.equal(served.status, 200, 'health answers while 100 slow heads trickle in')
  const results = await Promise.all(slow)
  t.ok(results.every((r) => r.closedByServer), 'every slow connection was closed by the server')
  t.ok(results.every((r) => (r.closedAfterMs ?? 0) >= HEADERS_TIMEOUT_MS), 'not before the head timeout')
  t.ok(results.every((r) => r.statuses.length === 0 || r.statuses[0] === 408), 'answered 408 when answered')
})

t.test('an idle connection that sends nothing is closed after the head timeout', embeddedRunOnly, async (t) => {
  const res = await rawRequest(port, [], { waitMs: HEADERS_TIMEOUT_MS * 4 })
  t.ok(res.closedByServer)
})
