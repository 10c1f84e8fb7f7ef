// The email channel's worker thread (email.ts, createEmailChannel): the SMTP transports and every
// message's MIME build and exchange run here, off the main thread's event loop.
import { parentPort, workerData } from 'node:worker_threads'
import { createSmtpSender, type EmailWorkerReply, type EmailWorkerRequest, type SmtpOptions } from './email.ts'

const sender = createSmtpSender(workerData as SmtpOptions)
const port = parentPort!

port.on('message', async (req: EmailWorkerRequest) => {
  if ('close' in req) {
    sender.close()
    port.close()
    return
  }
  const outcome = await sender.send(req.brand, req.message).catch((err: Error) => ({ kind: 'retry' as const, error: `smtp: ${err.message}` }))
  port.postMessage({ id: req.id, outcome } satisfies EmailWorkerReply)
})
