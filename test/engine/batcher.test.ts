import t from 'tap'
import { createBatcher } from '../../src/engine/batcher.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('callers of one turn share a run; later callers wait for the next; each gets its own result', async (t) => {
  const runs: number[][] = []
  const b = createBatcher<number, number>({
    async run(items) {
      runs.push(items)
      await sleep(20)
      return items.map((n) => n * 10)
    },
  })
  const first = [1, 2, 3].map((n) => b.add(n))
  await sleep(5) // the first run is going now
  const second = [4, 5].map((n) => b.add(n))
  t.same(await Promise.all([...first, ...second]), [10, 20, 30, 40, 50])
  t.same(runs, [[1, 2, 3], [4, 5]])
})

t.test('lingerMs: items added one by one within the linger share a run; a full batch runs at once', async (t) => {
  const runs: number[][] = []
  const b = createBatcher<number, number>({
    maxSize: 3,
    lingerMs: 40,
    async run(items) {
      runs.push(items)
      return items
    },
  })
  const started = performance.now()
  const lingering = [b.add(1), sleep(5).then(() => b.add(2))]
  await Promise.all(lingering)
  t.same(runs, [[1, 2]], 'two items 5 ms apart: one run')
  t.ok(performance.now() - started >= 35, 'the run waited for the linger')
  const full = performance.now()
  await Promise.all([b.add(3), b.add(4), b.add(5)])
  t.same(runs[1], [3, 4, 5])
  t.ok(performance.now() - full < 30, 'a full batch does not linger')
})

t.test('maxSize splits a burst; concurrency runs batches side by side', async (t) => {
  const runs: number[][] = []
  let running = 0
  let most = 0
  const b = createBatcher<number, number>({
    maxSize: 4,
    concurrency: 2,
    async run(items) {
      runs.push(items)
      running++
      most = Math.max(most, running)
      await sleep(10)
      running--
      return items
    },
  })
  await Promise.all(Array.from({ length: 10 }, (_, i) => b.add(i)))
  t.same(runs.map((r) => r.length), [4, 4, 2])
  t.equal(most, 2)
})

t.test('a failed batch is re-run item by item: only the bad item fails', async (t) => {
  const runs: string[][] = []
  const b = createBatcher<string, string>({
    async run(items) {
      runs.push(items)
      if (items.includes('bad')) throw new Error('bad item')
      return items.map((s) => s.toUpperCase())
    },
  })
  const out = await Promise.allSettled(['a', 'bad', 'c'].map((s) => b.add(s)))
  t.same(out.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message)), ['A', 'bad item', 'C'])
  t.same(runs, [['a', 'bad', 'c'], ['a'], ['bad'], ['c']])

  const strict = createBatcher<string, string>({ isolateFailures: false, run: async () => { throw new Error('all') } })
  const all = await Promise.allSettled(['x', 'y'].map((s) => strict.add(s)))
  t.same(all.map((o) => o.status), ['rejected', 'rejected'])
})

t.test('flush waits for everything added so far', async (t) => {
  let done = 0
  const b = createBatcher<number, void>({
    maxSize: 2,
    async run(items) {
      await sleep(5)
      done += items.length
      return items.map(() => undefined)
    },
  })
  for (let i = 0; i < 5; i++) void b.add(i)
  t.equal(b.waiting, 5)
  await b.flush()
  t.equal(done, 5)
  t.equal(b.waiting, 0)
})
