// The service as an operator runs it: `node src/main.ts` (what `npm start` runs) in its own process.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { nodeArgs } from '../helpers/processes.ts'
import { reapOnExit } from '../helpers/reap.ts'

function startProcess(env: Record<string, string>) {
  const child = spawn(process.execPath, [...nodeArgs(env), 'src/main.ts'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  reapOnExit(child)
  let out = ''
  const listening = new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk
      const m = /"port":(\d+),[^\n]*"msg":"respin listening"/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)))
  })
  listening.catch(() => {}) // awaited only by tests that expect the process to come up
  child.stderr.on('data', (chunk: Buffer) => (out += chunk))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, listening, exited, output: () => out }
}

t.test('starts on the embedded defaults, serves health, and stops cleanly on SIGTERM', embeddedRunOnly, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-main-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const env: Record<string, string> = { DATA_DIR: dataDir, ADMIN_KEY: 'admin-key-for-lifecycle-test' }
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL']) env[name] = ''
  const proc = startProcess(env)
  const port = await proc.listening
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/health`)
  t.equal(res.status, 200)
  const body = (await res.json()) as { status: string; checks: Record<string, { status: string }> }
  t.equal(body.status, 'ok')
  t.equal(body.checks.redis?.status, 'embedded')
  t.notMatch(proc.output(), /admin-key-for-lifecycle-test/, 'secrets are redacted from the startup log')
  proc.child.kill('SIGTERM')
  t.equal(await proc.exited, 0)
  t.match(proc.output(), /"msg":"stopped"/)
})

t.test('a second process refuses an embedded data directory that is in use', embeddedRunOnly, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-main-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const env: Record<string, string> = { DATA_DIR: dataDir, DATABASE_URL: '', CLICKHOUSE_URL: '', REDIS_URL: '' }
  const first = startProcess(env)
  await first.listening
  const second = startProcess(env)
  t.not(await second.exited, 0)
  t.match(second.output(), /in use by process/)
  first.child.kill('SIGTERM')
  t.equal(await first.exited, 0)
})

t.test('a bad configuration value stops the process at once with a clear message', embeddedRunOnly, async (t) => {
  const proc = startProcess({ PORT: 'eighty', RATE_LIMIT_INGEST_PER_MIN: '-1' })
  t.equal(await proc.exited, 78)
  t.match(proc.output(), /invalid configuration: .*PORT/)
  t.match(proc.output(), /RATE_LIMIT_INGEST_PER_MIN/)
})

t.test('a database that does not answer stops the start with one fatal line, and no error from the stores it closes', embeddedRunOnly, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-main-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  // PostgreSQL refuses at once while the embedded ClickHouse is still applying its migrations: the start
  // used to close ClickHouse under them, and their failure ("chdb command failed: No active connection
  // available") was logged as an error next to the real cause.
  const proc = startProcess({ DATA_DIR: dataDir, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/respin', CLICKHOUSE_URL: '', REDIS_URL: '' })
  t.equal(await proc.exited, 1)
  const lines = proc
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string } })
  const errors = lines.filter((l) => l.level >= 50)
  t.same(
    errors.map((l) => l.msg),
    ['respin failed to start'],
    'the cause only',
  )
  t.match(errors[0]?.err?.message, /ECONNREFUSED/)
})
