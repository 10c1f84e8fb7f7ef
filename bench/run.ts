// `npm run bench`: runs every bench/*.bench.ts in its own process, one after another, so one scenario's
// leftovers (threads, sockets, chDB) never skew the next. `npm run bench -- router` runs only matching files.
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const dir = fileURLToPath(new URL('.', import.meta.url))
const filters = process.argv.slice(2)
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort()

let failed = 0
for (const file of files) {
  process.stdout.write(`\n=== ${file}\n`)
  const result = spawnSync(process.execPath, ['--import', './src/ts-loader.mjs', dir + file], { stdio: 'inherit', env: process.env })
  if (result.status !== 0) failed++
}
process.exit(failed ? 1 : 0)
