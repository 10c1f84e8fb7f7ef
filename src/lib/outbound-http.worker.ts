// The outbound HTTP client's worker thread (outbound-http.ts, createOutboundHttpOnWorker).
import { serveWorkerCalls, workerOptions } from '../workers/rpc.ts'
import { createOutboundHttp, OutboundTimeoutError, type OutboundHttpOptions, type WireRequest, type WireResult } from './outbound-http.ts'

const http = createOutboundHttp(workerOptions<OutboundHttpOptions>())
serveWorkerCalls<WireRequest, WireResult>(
  async ({ target, req }) => {
    try {
      return { res: await http.request({ ...target, url: new URL(target.href) }, req) }
    } catch (err) {
      if (err instanceof OutboundTimeoutError) return { timeoutMs: req.timeoutMs }
      return { error: (err as Error)?.message || String(err) }
    }
  },
  () => http.close(),
)
