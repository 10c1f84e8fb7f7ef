// Folds many concurrent callers' single requests into one batch run: the engines' per-item handlers
// (one webhook attempt, one message) stay written per item, while under load their database work is
// done as one statement or one transaction for many items instead of a round trip each.
//
// Items added while no run is going collect until the next turn of the event loop (setImmediate), so
// everything a work loop's claim handed out at once lands in one batch; items added while runs are
// going collect for the next one. Each caller's promise settles with its own item's result once its
// batch has run (for a database write: once it committed), so per-item reasoning such as lease checks
// holds unchanged.

export interface BatcherOptions<In, Out> {
  /** Works a batch; returns one result per item, in order. */
  run(items: In[]): Promise<Out[]>
  /** Items per run (default 500). */
  maxSize?: number
  /** Runs at once (default 1): more lets the next batch's database work overlap this one's. */
  concurrency?: number
  /**
   * Wait this long after the first item (or after the previous run) before a run that is not full, so
   * items that arrive one by one (e.g. channel calls finishing one at a time) share a run (default 0:
   * the next turn of the event loop).
   */
  lingerMs?: number
  /**
   * When a batch of several items fails, run each item alone, so one bad item fails only its own
   * caller (the batch's transaction rolled back whole, so re-running the others is safe). Default true.
   */
  isolateFailures?: boolean
}

export interface Batcher<In, Out> {
  add(item: In): Promise<Out>
  /** Resolves when everything added so far has run. */
  flush(): Promise<void>
  /** Items waiting for a run. */
  readonly waiting: number
}

interface Entry<In, Out> {
  item: In
  resolve(out: Out): void
  reject(err: unknown): void
}

export function createBatcher<In, Out>(opts: BatcherOptions<In, Out>): Batcher<In, Out> {
  const maxSize = Math.max(1, opts.maxSize ?? 500)
  const concurrency = Math.max(1, opts.concurrency ?? 1)
  const isolate = opts.isolateFailures ?? true
  const lingerMs = Math.max(0, opts.lingerMs ?? 0)
  let queue: Entry<In, Out>[] = []
  let running = 0
  let scheduled = false
  const runs = new Set<Promise<void>>()

  async function runBatch(batch: Entry<In, Out>[]): Promise<void> {
    let results: Out[]
    try {
      results = await opts.run(batch.map((e) => e.item))
    } catch (err) {
      if (!isolate || batch.length === 1) {
        for (const e of batch) e.reject(err)
        return
      }
      for (const e of batch) await runBatch([e])
      return
    }
    batch.forEach((e, i) => e.resolve(results[i] as Out))
  }

  function pump() {
    while (running < concurrency && queue.length) {
      const batch = queue.slice(0, maxSize)
      queue = queue.slice(batch.length)
      running++
      const p: Promise<void> = runBatch(batch).finally(() => {
        running--
        runs.delete(p)
        if (lingerMs > 0 && queue.length < maxSize) schedule()
        else pump()
      })
      runs.add(p)
    }
  }

  function schedule() {
    if (scheduled || !queue.length) return
    scheduled = true
    const go = () => {
      scheduled = false
      pump()
    }
    if (lingerMs > 0) setTimeout(go, lingerMs)
    else setImmediate(go)
  }

  return {
    add(item) {
      return new Promise<Out>((resolve, reject) => {
        queue.push({ item, resolve, reject })
        // A free slot waits one turn (or lingerMs) so that concurrent callers share the run; a busy
        // batcher picks the queue up when a run ends. A full batch need not wait.
        if (running < concurrency) {
          if (lingerMs > 0 && queue.length >= maxSize) pump()
          else schedule()
        }
      })
    },
    async flush() {
      while (queue.length || runs.size) {
        pump()
        await Promise.allSettled([...runs])
      }
    },
    get waiting() {
      return queue.length
    },
  }
}
