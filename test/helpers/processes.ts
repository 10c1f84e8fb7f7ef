// Other processes of the service a test starts: an API process (src/main.ts, what `npm start` runs) and the
// admin CLI (src/admin/cli.ts, what `npm run admin` runs).
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isolateDatabase, seedEmbeddedClickHouse, seedEmbeddedPostgres } from './harness.ts'
import { reapOnExit } from './reap.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))

/**
 * Node's arguments for a process a test starts. One on embedded PostgreSQL runs PGlite's WebAssembly, whose
 * hot functions V8's optimising tier recompiles in the background: seconds of CPU a process that lives for
 * a test never earns back (the harness turns that tier off in the test's own process for the same reason).
 * The service itself keeps V8's defaults.
 */
export function nodeArgs(env: Record<string, string | undefined>): string[] {
  const embeddedPostgres = !(env.DATABASE_URL ?? process.env.DATABASE_URL)
  return [...(embeddedPostgres ? ['--import', './test/helpers/liftoff-only.mjs'] : []), '--import', './src/ts-loader.mjs']
}

export interface Child {
  proc: ChildProcess
  port: number
  origin: string
  adminKey: string
  exited: Promise<number | null>
}

/**
 * Runs `node --import ./src/ts-loader.mjs src/main.ts` (what `npm start` runs) with the given env; resolves
 * once it listens. An embedded server's new DATA_DIR gets the migrated PGlite and chDB templates (harness.ts), as a
 * harness does: a first start from nothing is test/system/lifecycle.test.ts's and CI's smoke test's.
 */
export async function spawnServer(env: Record<string, string | undefined>): Promise<Child> {
  await isolateDatabase() // the file's own database on a PostgreSQL server (harness.ts)
  const dataDir = env.DATA_DIR
  if (dataDir) await seedOnce(dataDir, env, { clickhouse: true })
  const adminKey = env.ADMIN_KEY ?? `admin-${randomBytes(12).toString('hex')}`
  const proc = spawn(process.execPath, [...nodeArgs(env), 'src/main.ts'], {
    cwd: root,
    // RESPONSE_SCHEMA_CHECK: as in the harness, a response its route's schema does not describe is a 500.
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', RESPONSE_SCHEMA_CHECK: process.env.RESPONSE_SCHEMA_CHECK ?? 'error', ...env, ADMIN_KEY: adminKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  reapOnExit(proc)
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)))
  return new Promise((resolve, reject) => {
    let buf = ''
    let errBuf = ''
    const timer = setTimeout(() => reject(new Error(`server did not start: ${errBuf.slice(-2000)}`)), 60_000)
    proc.stderr?.on('data', (d: Buffer) => {
      errBuf += d.toString()
    })
    proc.stdout?.on('data', (d: Buffer) => {
      buf += d.toString()
      let nl: number
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        if (line.includes('"respin listening"')) {
          const port = (JSON.parse(line) as { port: number }).port
          clearTimeout(timer)
          resolve({ proc, port, origin: `http://127.0.0.1:${port}`, adminKey, exited })
        }
      }
    })
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}: ${errBuf.slice(-2000)}`))
    })
  })
}

export async function call(origin: string, method: string, path: string, key: string | undefined, body?: unknown) {
  const res = await fetch(`${origin}/api/v1${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers }
}

const seeding = new Map<string, Promise<void>>()
/**
 * Gives a directory the file made the migrated templates of its embedded stores (the ones `env` does
 * not point at a server), once per directory, also for CLI runs started together. A directory a store
 * already fills (a restart on the same one) is left as it is.
 */
function seedOnce(dataDir: string, env: Record<string, string | undefined>, o: { clickhouse: boolean }): Promise<void> {
  const key = `${dataDir}\0${o.clickhouse}`
  let done = seeding.get(key)
  if (!done) {
    done = (async () => {
      if (!existsSync(dataDir)) return
      if (!(env.DATABASE_URL ?? process.env.DATABASE_URL) && !existsSync(join(dataDir, 'postgres'))) await seedEmbeddedPostgres(dataDir)
      if (o.clickhouse && !(env.CLICKHOUSE_URL ?? process.env.CLICKHOUSE_URL) && !existsSync(join(dataDir, 'clickhouse'))) await seedEmbeddedClickHouse(dataDir)
    })()
    seeding.set(key, done)
  }
  return done
}

export interface CliResult {
  status: number | null
  stdout: string
  stderr: string
}

/**
 * Runs `npm run admin -- <args>` against DATA_DIR `dataDir` (its embedded database; on a PostgreSQL server,
 * DATABASE_URL's), without ClickHouse or Redis, and collects what it printed.
 */
export function runCli(dataDir: string, ...args: string[]): Promise<CliResult> {
  return runCliWith({}, dataDir, ...args)
}

/** runCli with some environment variables of its own (a bad setting, another database). */
export async function runCliWith(env: Record<string, string>, dataDir: string, ...args: string[]): Promise<CliResult> {
  // A new embedded directory: the migrated template, as spawnServer gives one (initdb alone is seconds).
  await seedOnce(dataDir, env, { clickhouse: false })
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgs(env), 'src/admin/cli.ts', ...args], {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir, CLICKHOUSE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c))
    child.stderr.on('data', (c: Buffer) => (stderr += c))
    child.once('close', (status) => resolve({ status, stdout, stderr }))
  })
}
