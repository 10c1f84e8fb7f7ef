import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createCursorCodec, decodeCursorOr400 } from '../../src/lib/cursor.ts'

t.test('a cursor round-trips and is opaque base64url', async (t) => {
  const codec = createCursorCodec(randomBytes(32), 'test')
  const token = codec.encode({ t: '2026-01-01T00:00:00.000001Z', i: 'abc' })
  t.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
  t.same(codec.decode(token), { t: '2026-01-01T00:00:00.000001Z', i: 'abc' })
})

t.test('any change, another key or another purpose is rejected', async (t) => {
  const secret = randomBytes(32)
  const codec = createCursorCodec(secret, 'test')
  const token = codec.encode({ i: 1 })
  const [body, mac] = token.split('.') as [string, string]
  const forgedBody = Buffer.from(JSON.stringify({ i: 2 })).toString('base64url')
  for (const bad of [`${forgedBody}.${mac}`, `${body}.${mac.slice(1)}`, `${body}.`, body, `.${mac}`, `${token}.x`, '', 'x'.repeat(5000)]) {
    t.equal(codec.decode(bad), null, bad.slice(0, 40))
  }
  t.equal(createCursorCodec(randomBytes(32), 'test').decode(token), null, 'another secret')
  t.equal(createCursorCodec(secret, 'other').decode(token), null, 'another purpose')
  t.throws(() => decodeCursorOr400(codec, 'nope'), { code: 'BAD_REQUEST' })
})
