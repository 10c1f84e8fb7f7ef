// The email channel's worker thread (email.ts, createEmailChannel): the SMTP transports and every
// message's MIME build and exchange run here, off the main thread's event loop.
import { serveWorkerCalls, workerOptions } from '../../workers/rpc.ts'
import { createSmtpSender, type EmailSend, type SmtpOptions } from './email.ts'
import type { Outcome } from './outcome.ts'

const sender = createSmtpSender(workerOptions<SmtpOptions>())
serveWorkerCalls<EmailSend, Outcome>(
  (s) => sender.send(s.brand, s.message).catch((err: Error) => ({ kind: 'retry', error: `smtp: ${err.message}` })),
  () => sender.close(),
)
