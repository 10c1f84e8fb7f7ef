// The delivery bench's SMTP server (smtp-server), in a process of its own so its CPU is not the engine's
// thread (as an operator's mail relay never is). Tells the parent over IPC: { port } once listening, then
// per accepted message { id, at } (the X-Respin-Notification header; `at` in ms since the epoch, with
// sub-millisecond precision) or { bare: 1 } for a message without one. Messages go up in batches per
// event-loop turn, so the IPC costs little next to the SMTP exchange.
import { SMTPServer } from 'smtp-server'

type Report = { id: string; at: number } | { bare: 1 }
let pending: Report[] = []
const flush = () => {
  process.send?.(pending)
  pending = []
}
const report = (r: Report) => {
  if (!pending.length) setImmediate(flush)
  pending.push(r)
}

const smtp = new SMTPServer({
  disabledCommands: ['STARTTLS', 'AUTH'],
  authOptional: true,
  // The engine's pooled connections stay open until the app closes: do not wait for them at the end.
  closeTimeout: 500,
  onData(stream, _s, cb) {
    let head = ''
    stream.on('data', (c: Buffer) => {
      if (head.length < 4096) head += c.toString('latin1')
    })
    stream.on('end', () => {
      const id = /X-Respin-Notification: ([0-9a-f-]{36})/i.exec(head)?.[1]
      report(id ? { id, at: performance.timeOrigin + performance.now() } : { bare: 1 })
      cb()
    })
  },
})
smtp.listen(0, '127.0.0.1', () => process.send?.({ port: (smtp.server.address() as { port: number }).port }))
process.on('disconnect', () => smtp.close(() => process.exit(0)))
