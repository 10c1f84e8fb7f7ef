// The worker-thread calls behind the email and webhook channels (src/workers/rpc.ts): answers in order
// of the calls, many calls of one turn at once, a handler's error, a worker that dies, and close.
import t from 'tap'
import { createWorkerClient } from '../../src/workers/rpc.ts'

const client = () =>
  createWorkerClient<{ op: string; value?: string }, string>({
    url: new URL('./fixtures/echo.worker.ts', import.meta.url),
    data: { prefix: 'w:' },
    onLost: (why) => `lost: ${why}`,
  })

t.test('answers each call, many in one turn, and a handler error rejects only its call', async (t) => {
  const c = client()
  const values = Array.from({ length: 500 }, (_, i) => String(i))
  t.same(await Promise.all(values.map((value) => c.call({ op: 'echo', value }))), values.map((v) => `w:${v}`))
  await t.rejects(c.call({ op: 'throw', value: 'x' }), { message: 'refused x' })
  t.equal(await c.call({ op: 'echo', value: 'after' }), 'w:after')
  await c.close()
})

t.test('a worker that dies fails its calls in flight with onLost; the next call starts another', async (t) => {
  const c = client()
  const held = c.call({ op: 'hold' })
  const died = c.call({ op: 'die' })
  t.match(await held, /^lost: worker exited \(3\)/)
  t.match(await died, /^lost: worker exited \(3\)/)
  t.equal(await c.call({ op: 'echo', value: 'again' }), 'w:again')
  await c.close()
})

t.test('close fails what is in flight and ends the thread', async (t) => {
  const c = client()
  const held = c.call({ op: 'hold' })
  await c.call({ op: 'echo', value: 'up' })
  await c.close()
  t.equal(await held, 'lost: closed')
  t.equal(await c.call({ op: 'echo', value: 'reopened' }), 'w:reopened', 'a call after close starts a worker')
  await c.close()
})
