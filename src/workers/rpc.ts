// Calls to a worker thread that holds a channel's connections (SMTP pools, HTTP pools): the main thread
// keeps the rules, queries and outcomes; the worker does the protocol work (MIME builds, HTTP exchanges,
// TLS, socket writes), on the machine's other core. One mechanism for every such channel:
//
// - Calls made in one turn of the event loop go to the worker as one message, and its answers come back
//   the same way: a message between threads costs about as much as a small call, so one per call would
//   eat much of the gain.
// - The worker starts on the first call; it keeps the process alive only while calls are in flight.
// - A worker that dies (it should not) fails its calls in flight with `onLost`'s answer, and the next call
//   starts another. Closing fails what is still in flight the same way (the callers stopped first).
import { Worker, parentPort, workerData } from 'node:worker_threads'

interface Call<Req> {
  id: number
  req: Req
}
interface Answer<Res> {
  id: number
  res?: Res
  /** The handler threw: its message (errors do not cross threads with their class). */
  error?: string
}
type ToWorker<Req> = { calls: Call<Req>[] } | { close: true }

export interface WorkerClient<Req, Res> {
  call(req: Req): Promise<Res>
  close(): Promise<void>
}

export function createWorkerClient<Req, Res>(opts: {
  /** The worker's module (it calls serveWorkerCalls). */
  url: URL
  /** Handed to the worker as workerData. */
  data: unknown
  /** What a call in flight answers when its worker dies or closes. */
  onLost: (why: string) => Res
}): WorkerClient<Req, Res> {
  interface Running {
    worker: Worker
    pending: Map<number, { resolve: (r: Res) => void; reject: (e: Error) => void }>
    outbox: Call<Req>[]
  }
  let current: Running | undefined
  let nextId = 0

  function fail(running: Running, why: string) {
    if (current === running) current = undefined
    for (const p of running.pending.values()) p.resolve(opts.onLost(why))
    running.pending.clear()
  }

  function start(): Running {
    // Workers load .ts files through the loader flag they inherit (src/ts-loader.mjs).
    const worker = new Worker(opts.url, { workerData: opts.data, execArgv: process.execArgv })
    const running: Running = { worker, pending: new Map(), outbox: [] }
    worker.unref()
    worker.on('message', (answers: Answer<Res>[]) => {
      for (const a of answers) {
        const p = running.pending.get(a.id)
        running.pending.delete(a.id)
        if (a.error !== undefined) p?.reject(new Error(a.error))
        else p?.resolve(a.res as Res)
      }
      if (!running.pending.size) worker.unref()
    })
    worker.on('error', (err) => fail(running, `worker failed: ${err.message}`))
    worker.on('exit', (code) => fail(running, `worker exited (${code})`))
    return running
  }

  return {
    call(req) {
      const running = (current ??= start())
      const id = nextId++
      return new Promise<Res>((resolve, reject) => {
        // Calls in flight keep the process alive (their callers wait on them); an idle worker does not.
        if (!running.pending.size) running.worker.ref()
        running.pending.set(id, { resolve, reject })
        if (running.outbox.push({ id, req }) === 1) {
          setImmediate(() => {
            const calls = running.outbox
            running.outbox = []
            running.worker.postMessage({ calls } satisfies ToWorker<Req>)
          })
        }
      })
    },
    async close() {
      const running = current
      if (!running) return
      current = undefined
      const exited = new Promise<void>((resolve) => running.worker.once('exit', () => resolve()))
      running.worker.postMessage({ close: true } satisfies ToWorker<Req>)
      fail(running, 'closed')
      // It ends its connections itself; past a few seconds it is stopped.
      const timer = setTimeout(() => void running.worker.terminate(), 5000)
      await exited
      clearTimeout(timer)
    },
  }
}

/**
 * The worker's side: answers each call with `handle`, and on close runs `close` and lets the thread end.
 * Answers finished in one turn of the worker's event loop go back as one message.
 */
export function serveWorkerCalls<Req, Res>(handle: (req: Req) => Promise<Res>, close: () => Promise<void> | void): void {
  const port = parentPort!
  let outbox: Answer<Res>[] = []
  const answer = (a: Answer<Res>) => {
    if (outbox.push(a) === 1) {
      setImmediate(() => {
        const answers = outbox
        outbox = []
        port.postMessage(answers)
      })
    }
  }
  port.on('message', async (msg: ToWorker<Req>) => {
    if ('close' in msg) {
      await close()
      port.close()
      return
    }
    for (const { id, req } of msg.calls) {
      handle(req).then(
        (res) => answer({ id, res }),
        (err: unknown) => answer({ id, error: (err as Error)?.message ?? String(err) }),
      )
    }
  })
}

/** What the worker was given (its options). */
export const workerOptions = <T>() => workerData as T
