// Keyed actors: every key (a webhook endpoint, a channel target, a campaign) has its own mailbox and its
// own concurrency limit, and all keys share one global limit. A slot is handed to keys in turn, so a
// key with a long queue or slow work never holds up the others beyond its own per-key limit.
//
// Generic and in-process: durability lives in the table the work-loop claims from (src/engine/work-loop.ts).

export interface ActorPoolOptions<T> {
  /** Runs one item. A rejection is reported to onError and never stops the pool. */
  handle(key: string, item: T): Promise<void>
  /**
   * At most this many items of one key run at once (default 1: a key's items run in submit order). A
   * function is asked each time the key could start another item, so a key's limit can change while it
   * has work (a failing webhook endpoint drops to one attempt at a time).
   */
  perKeyConcurrency?: number | ((key: string) => number)
  /** At most this many items run at once over all keys (default 64). */
  globalConcurrency?: number
  onError?(err: unknown, key: string, item: T): void
}

export interface ActorPool<T> {
  /** Queues an item in its key's mailbox. Refused (returns false) once the pool is stopping. */
  submit(key: string, item: T): boolean
  /** Items queued or running, over all keys. */
  readonly size: number
  /** Items running now. */
  readonly running: number
  /** Items queued or running for one key. */
  sizeOf(key: string): number
  /** Free global slots: how many more items would start now (useful to size the next claim). */
  readonly freeSlots: number
  /** Resolves when nothing is queued or running. */
  idle(): Promise<void>
  /** Drops what is queued (the durable queue keeps it), waits for what runs; returns the dropped items. */
  stop(): Promise<T[]>
  /**
   * Drops one key's queued items beyond `keep` (running ones count towards it; the latest queued go first)
   * and returns them: for a key whose limit just fell (the durable queue keeps the items).
   */
  shed(key: string, keep: number): T[]
}

interface Mailbox<T> {
  queue: T[]
  /** Index of the next item in queue (a moving head instead of Array.shift, which is O(n)). */
  head: number
  running: number
  /** Whether the key sits in the ready ring. */
  ready: boolean
}

export function createActorPool<T>(opts: ActorPoolOptions<T>): ActorPool<T> {
  const globalLimit = Math.max(1, opts.globalConcurrency ?? 64)
  const perKey = opts.perKeyConcurrency ?? 1
  const limitOf = (key: string) => Math.max(1, typeof perKey === 'function' ? perKey(key) : perKey)
  const boxes = new Map<string, Mailbox<T>>()
  // Keys that have queued items and a free per-key slot, in the order they get the next global slot.
  const ring: string[] = []
  let ringHead = 0
  let running = 0
  let queued = 0
  let stopping = false
  let idleWaiters: (() => void)[] = []

  const pending = (box: Mailbox<T>) => box.queue.length - box.head

  function markReady(key: string, box: Mailbox<T>) {
    if (!box.ready && pending(box) > 0 && box.running < limitOf(key)) {
      box.ready = true
      ring.push(key)
    }
  }

  function pump() {
    while (running < globalLimit && ringHead < ring.length) {
      const key = ring[ringHead++]!
      const box = boxes.get(key)
      // An entry may be stale: its items shed, or its limit lowered since it was queued for a slot.
      if (!box || !box.ready) continue
      box.ready = false
      if (pending(box) === 0 || box.running >= limitOf(key)) continue
      const item = box.queue[box.head]!
      box.queue[box.head++] = undefined as T
      if (box.head > 1024 && box.head * 2 > box.queue.length) {
        box.queue = box.queue.slice(box.head)
        box.head = 0
      }
      queued--
      box.running++
      running++
      // Back of the ring: the other keys get their turn first.
      markReady(key, box)
      run(key, box, item)
    }
    if (ringHead > 1024 && ringHead * 2 > ring.length) {
      ring.splice(0, ringHead)
      ringHead = 0
    }
  }

  function run(key: string, box: Mailbox<T>, item: T) {
    let p: Promise<void>
    try {
      p = opts.handle(key, item)
    } catch (err) {
      p = Promise.reject(err)
    }
    p.catch((err: unknown) => opts.onError?.(err, key, item)).finally(() => {
      box.running--
      running--
      if (box.running === 0 && pending(box) === 0) boxes.delete(key)
      else markReady(key, box)
      pump()
      if (running === 0 && queued === 0) {
        const waiters = idleWaiters
        idleWaiters = []
        for (const w of waiters) w()
      }
    })
  }

  return {
    submit(key, item) {
      if (stopping) return false
      let box = boxes.get(key)
      if (!box) {
        box = { queue: [], head: 0, running: 0, ready: false }
        boxes.set(key, box)
      }
      box.queue.push(item)
      queued++
      markReady(key, box)
      pump()
      return true
    },
    get size() {
      return queued + running
    },
    get running() {
      return running
    },
    get freeSlots() {
      return Math.max(0, globalLimit - running)
    },
    sizeOf(key) {
      const box = boxes.get(key)
      return box ? pending(box) + box.running : 0
    },
    idle() {
      if (running === 0 && queued === 0) return Promise.resolve()
      return new Promise((resolve) => idleWaiters.push(resolve))
    },
    shed(key, keep) {
      const box = boxes.get(key)
      if (!box) return []
      const drop = Math.min(pending(box), box.running + pending(box) - Math.max(0, keep))
      if (drop <= 0) return []
      const dropped = box.queue.splice(box.queue.length - drop, drop)
      queued -= drop
      // Its ring entry (if ready) stays: pump skips a box with nothing pending.
      if (box.running === 0 && pending(box) === 0) boxes.delete(key)
      return dropped
    },
    async stop() {
      stopping = true
      const dropped: T[] = []
      for (const [key, box] of boxes) {
        for (let i = box.head; i < box.queue.length; i++) dropped.push(box.queue[i]!)
        queued -= pending(box)
        box.queue = []
        box.head = 0
        if (box.running === 0) boxes.delete(key)
      }
      ring.length = 0
      ringHead = 0
      await this.idle()
      return dropped
    },
  }
}
