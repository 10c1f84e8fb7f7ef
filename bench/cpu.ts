// CPU accounting for the benches: what each process (and each thread of ours) spends per item, read
// from /proc, so a rate that misses its target says where the machine's two cores went. Linux only;
// elsewhere every reading is empty and the lines say nothing.
import { readdirSync, readFileSync } from 'node:fs'

/** A /proc stat file's command name and CPU seconds (user + system) so far. */
function readStat(path: string): { name: string; seconds: number } {
  const st = readFileSync(path, 'utf8')
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
  return { name: st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')), seconds: (Number(f[11]) + Number(f[12])) / 100 }
}

/** CPU seconds (all threads) a process has used so far: load-independent cost. */
export function cpuSeconds(pid: number): number {
  return readStat(`/proc/${pid}/stat`).seconds
}

/**
 * CPU seconds per stat file (keyed by its path: one thread or process), with the name `nameOf` gives it
 * (undefined: left out); files that vanish are skipped. Readings are compared file by file and summed by
 * name only then: ClickHouse renames its pool threads by the task they run (ThreadPool, QueryCompPipeEx,
 * RuntimeData, ...), and a reading keyed by name counted such a thread's whole life as the run's when its
 * name changed in between (one run showed 162 µs per event of "RuntimeData" that way).
 */
function cpuByFile(paths: string[], nameOf: (name: string, path: string) => string | undefined): CpuReading {
  const m: CpuReading = new Map()
  for (const path of paths) {
    try {
      const { name, seconds } = readStat(path)
      const key = nameOf(name, path)
      if (key) m.set(path, { name: key, seconds })
    } catch {}
  }
  return m
}

const total = (r: CpuReading) => [...r.values()].reduce((s, x) => s + x.seconds, 0)

/**
 * CPU seconds per thread of a process, named for the report: the main thread apart, other threads by name
 * without digits. Node names every thread `node` (worker threads, V8's GC helpers, libuv's pool alike):
 * BENCH_TIDS=1 names them by thread id too, to tell a busy worker thread from the rest.
 */
export function threadCpu(pid: number, prefix = ''): CpuReading {
  const main = `/proc/${pid}/task/${pid}/stat`
  const byTid = process.env.BENCH_TIDS === '1'
  let paths: string[] = []
  try {
    paths = readdirSync(`/proc/${pid}/task`).map((tid) => `/proc/${pid}/task/${tid}/stat`)
  } catch {}
  return cpuByFile(paths, (name, path) => prefix + (path === main ? 'main' : byTid ? `${name}#${path.split('/')[4]}` : name.replace(/[0-9]+$/, '')))
}

/** Every process's /proc stat file (none where there is no /proc). */
function processStatPaths(): string[] {
  try {
    return readdirSync('/proc').filter((pid) => /^\d+$/.test(pid)).map((pid) => `/proc/${pid}/stat`)
  } catch {
    return []
  }
}

/**
 * CPU seconds of this machine's PostgreSQL and Redis servers (every process by that name). Empty when
 * they run elsewhere. A backend that exits takes its seconds with it: read while the pool is open.
 */
export function storeCpu(): CpuReading {
  const names: Record<string, string> = { postgres: 'PostgreSQL', 'redis-server': 'Redis' }
  return cpuByFile(processStatPaths(), (name) => names[name])
}

/**
 * A cheap reading of PostgreSQL's CPU seconds for timing single statements: the server's processes are
 * listed once (a new backend after that is not counted; open the connections first).
 */
export function postgresCpuMeter(): () => number {
  const paths = [...cpuByFile(processStatPaths(), (name) => (name === 'postgres' ? 'pg' : undefined)).keys()]
  return () => total(cpuByFile(paths, () => 'pg'))
}

/** One reading of everything a bench names (its own threads, other processes of its own, the stores), by stat file. */
export type CpuReading = Map<string, { name: string; seconds: number }>

/** `others`: processes of the bench's own (a server, a receiver) by name, each split by thread like the bench. */
export function readCpu(others: Record<string, number | undefined> = {}): CpuReading {
  const m = new Map([...threadCpu(process.pid, 'bench '), ...storeCpu()])
  for (const [name, pid] of Object.entries(others)) if (pid !== undefined) for (const [k, v] of threadCpu(pid, `${name} `)) m.set(k, v)
  return m
}

function perItem(before: CpuReading, after: CpuReading, items: number): [string, number][] {
  const byName = new Map<string, number>()
  for (const [file, { name, seconds }] of after) byName.set(name, (byName.get(name) ?? 0) + seconds - (before.get(file)?.seconds ?? 0))
  return [...byName]
    .map(([name, s]): [string, number] => [name, (s / Math.max(1, items)) * 1e6])
    .filter(([, us]) => us >= 0.5)
    .sort((a, b) => b[1] - a[1])
}

const format = (parts: [string, number][]) => parts.map(([k, us]) => `${k} ${us.toFixed(1)}`).join(', ')

/** "a 41.0, b 3.1" in µs per item between two readings (parts under 0.5 µs left out). */
export function cpuParts(before: CpuReading, after: CpuReading, items: number): string {
  return format(perItem(before, after, items))
}

/** The parts and their total: "a 41.0, b 3.1; total 44.1" ('' when nothing could be read). */
export function cpuLine(before: CpuReading, after: CpuReading, items: number): string {
  const parts = perItem(before, after, items)
  return parts.length ? `${format(parts)}; total ${parts.reduce((s, [, us]) => s + us, 0).toFixed(1)}` : ''
}
