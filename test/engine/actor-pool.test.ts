import t from 'tap'
import { createActorPool } from '../../src/engine/actor-pool.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('per-key order and limit, global limit, and a slow key does not delay the others', async (t) => {
  const log: string[] = []
  let running = 0
  let maxRunning = 0
  const perKeyRunning = new Map<string, number>()
  let maxPerKey = 0
  const pool = createActorPool<number>({
    globalConcurrency: 4,
    perKeyConcurrency: (key) => (key === 'wide' ? 3 : 1),
    async handle(key, n) {
      running++
      maxRunning = Math.max(maxRunning, running)
      perKeyRunning.set(key, (perKeyRunning.get(key) ?? 0) + 1)
      if (key !== 'wide') maxPerKey = Math.max(maxPerKey, perKeyRunning.get(key)!)
      await sleep(key === 'slow' ? 200 : 5)
      perKeyRunning.set(key, perKeyRunning.get(key)! - 1)
      running--
      log.push(`${key}:${n}`)
    },
  })
  const started = Date.now()
  for (let i = 0; i < 3; i++) pool.submit('slow', i)
  for (let i = 0; i < 10; i++) pool.submit('fast', i)
  for (let i = 0; i < 6; i++) pool.submit('wide', i)
  t.equal(pool.size, 19)
  let fastDoneAt = 0
  while (!log.includes('fast:9')) await sleep(2)
  fastDoneAt = Date.now() - started
  await pool.idle()
  t.ok(fastDoneAt < 200, `fast key finished in ${fastDoneAt} ms while the slow key was still busy`)
  t.same(log.filter((l) => l.startsWith('fast')), Array.from({ length: 10 }, (_, i) => `fast:${i}`), 'per-key order')
  t.same(log.filter((l) => l.startsWith('slow')), ['slow:0', 'slow:1', 'slow:2'])
  t.ok(maxRunning <= 4, `global limit held (max ${maxRunning})`)
  t.equal(maxPerKey, 1, 'per-key limit of 1 held')
  t.equal(pool.size, 0)
})

t.test('a failing item is reported and does not stop its key', async (t) => {
  const errors: unknown[] = []
  const done: number[] = []
  const pool = createActorPool<number>({
    async handle(_k, n) {
      if (n === 1) throw new Error('boom')
      done.push(n)
    },
    onError: (err) => errors.push(err),
  })
  for (const n of [0, 1, 2]) pool.submit('k', n)
  await pool.idle()
  t.same(done, [0, 2])
  t.equal(errors.length, 1)
})

t.test('stop drops what is queued and waits for what runs', async (t) => {
  let finished = 0
  const pool = createActorPool<number>({
    async handle() {
      await sleep(30)
      finished++
    },
  })
  for (let i = 0; i < 5; i++) pool.submit('k', i)
  const dropped = await pool.stop()
  t.same(dropped, [1, 2, 3, 4])
  t.equal(finished, 1)
  t.equal(pool.submit('k', 9), false)
})

t.test('a key whose limit falls runs at the new limit at once; shed hands back its latest queued items only', async (t) => {
  let limit = 4
  const runningOf = new Map<string, number>()
  let maxSeenAfterDrop = 0
  let dropped = false
  const gates: (() => void)[] = []
  const pool = createActorPool<number>({
    perKeyConcurrency: () => limit,
    globalConcurrency: 16,
    async handle(key) {
      runningOf.set(key, (runningOf.get(key) ?? 0) + 1)
      if (dropped) maxSeenAfterDrop = Math.max(maxSeenAfterDrop, runningOf.get(key) ?? 0)
      await new Promise<void>((r) => gates.push(r))
      runningOf.set(key, (runningOf.get(key) ?? 0) - 1)
    },
  })
  for (let i = 0; i < 10; i++) pool.submit('k', i)
  t.equal(pool.running, 4, 'four at first')
  limit = 1
  dropped = true
  const shed = pool.shed('k', 6)
  t.same(shed, [6, 7, 8, 9], 'the latest queued, none running')
  t.equal(pool.sizeOf('k'), 6)
  // The four running end one by one; with the new limit only one more ever runs at a time.
  while (gates.length) {
    gates.shift()!()
    await sleep(5)
  }
  await pool.idle()
  t.equal(maxSeenAfterDrop, 1, 'never more than the new limit once it fell (the four already running excepted)')
  t.same(pool.shed('k', 0), [], 'nothing left to shed')
})
