// The Piscina pool that runs ingestion's CPU work. One per process, created by the ingest service.
import { availableParallelism } from 'node:os'
import { Piscina } from 'piscina'
import type { IngestTask, IngestTaskResult } from './protocol.ts'

export interface IngestPool {
  run(task: IngestTask): Promise<IngestTaskResult>
  close(): Promise<void>
}

export function createIngestPool(opts: { threads?: number } = {}): IngestPool {
  const threads = opts.threads ?? Math.max(1, Math.min(4, availableParallelism()))
  const pool = new Piscina({
    filename: new URL('./ingest.worker.ts', import.meta.url).href,
    minThreads: threads,
    maxThreads: threads,
    idleTimeout: 60_000,
    // Workers inherit the tsx loader through execArgv (docs/developing.md).
    execArgv: process.execArgv,
  })
  return {
    run(task) {
      // Move the body bytes instead of copying them; the caller must not touch them afterwards.
      return pool.run(task, { transferList: [task.bodies.buffer as ArrayBuffer] }) as Promise<IngestTaskResult>
    },
    close: () => pool.destroy(),
  }
}
