// Shutdown drains in-flight requests and is prompt also after clients aborted uploads: an aborted body
// leaves the in-flight count, as its handler will never run (src/http/router.ts). Both engines.
import net from 'node:net'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

/** Sends a head and half a body, then drops the connection. */
async function abortedUpload(port: number): Promise<void> {
  const socket = net.connect({ port, host: '127.0.0.1' })
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write('POST /api/v1/events HTTP/1.1\r\nHost: respin\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"events":[')
  await new Promise((resolve) => setTimeout(resolve, 100))
  socket.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
}

for (const engine of ['node', 'uws'] as const) {
  t.test(`${engine}: shutdown after aborted uploads does not wait out the drain timeout`, async (t) => {
    const h = await startHarness(t, { env: { HTTP_ENGINE: engine } })
    for (let i = 0; i < 3; i++) await abortedUpload(h.app.port)
    t.equal((await h.request('GET', '/health')).status, 200, 'still serving')
    const started = Date.now()
    await h.app.close()
    const took = Date.now() - started
    // The drain timeout is 10 s; a stuck counter waits all of it.
    t.ok(took < 5000, `closed in ${took} ms`)
  })
}

t.test('node: a request in flight when shutdown starts is answered, with connection: close', async (t) => {
  const h = await startHarness(t)
  const tenant = await h.createTenant()
  const socket = net.connect({ port: h.app.port, host: '127.0.0.1' })
  await new Promise((resolve) => socket.once('connect', resolve))
  let text = ''
  socket.on('data', (c) => (text += c))
  const closed = new Promise((resolve) => socket.once('close', resolve))
  const body = JSON.stringify({ event_id: 'drain-1', player_id: 'p1', event_type: 'login' })
  // The head now, the body after shutdown began: the request is in flight across the close.
  socket.write(`POST /api/v1/events HTTP/1.1\r\nHost: respin\r\nx-api-key: ${tenant.key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`)
  await new Promise((resolve) => setTimeout(resolve, 100))
  const closing = h.app.close()
  await new Promise((resolve) => setTimeout(resolve, 100))
  socket.write(body)
  await closing
  await closed
  t.match(text, /^HTTP\/1\.1 20[02] /)
  t.match(text.toLowerCase(), /connection: close/)
})
