// Runs after `npm install` / `npm ci` (package.json "postinstall"): mends three faults of the `postgres`
// driver 3.4.9 that end the whole process or wedge a connection when PostgreSQL drops a connection (a
// restart, a failover, pg_terminate_backend), until a release carries the upstream fixes:
// 1. `nextWrite` runs from a setImmediate after `closed()` set the socket to null and throws a TypeError no
//    caller can catch (porsager/postgres#1154, #1208; PRs #1176, #1209). Now it settles the connection's
//    queries with CONNECTION_CLOSED instead.
// 2. `terminate()` and `closed()` cancel the pending write but leave `nextWriteTimer` set, so the reconnected
//    connection never schedules a write again. Now they reset it and drop the dead connection's buffer.
// 3. The array-type query every new connection runs first is started from a sync handler that drops its
//    promise: a connection terminated at that moment is an unhandled rejection (#1192, #1223), which ends
//    the process. Now its failure is caught and the types are fetched again on the next ready connection.
// Each mend is applied once (idempotent); a driver whose code no longer looks like this is left alone.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', 'postgres')

const mends = [
  {
    name: 'nextWrite on a closed socket',
    done: '/* respin: nextWrite guard */',
    apply: (text) =>
      text.replace('function nextWrite(fn) {', `function nextWrite(fn) {
    /* respin: nextWrite guard */
    if (socket === null) {
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }`),
  },
  {
    name: 'stale write timer after a close',
    done: 'clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null',
    apply: (text) =>
      text.split('    clearImmediate(nextWriteTimer)\n').length === 3
        ? text.replaceAll('    clearImmediate(nextWriteTimer)\n', '    clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null\n')
        : text,
  },
  {
    name: 'dropped array-type fetch',
    done: '/* respin: array types retried */',
    apply: (text) =>
      text.replace('        return fetchArrayTypes()\n', '        return fetchArrayTypes().catch(() => { needsTypes = true }) /* respin: array types retried */\n'),
  },
]

for (const dir of ['src', 'cjs/src', 'cf/src']) {
  const file = join(root, dir, 'connection.js')
  if (!existsSync(file)) continue
  let text = readFileSync(file, 'utf8')
  for (const mend of mends) {
    if (text.includes(mend.done)) continue
    const mended = mend.apply(text)
    if (mended === text) console.warn(`respin: postgres ${dir}/connection.js: "${mend.name}" not found (not the 3.4.9 code); left as it is`)
    text = mended
  }
  writeFileSync(file, text)
}
