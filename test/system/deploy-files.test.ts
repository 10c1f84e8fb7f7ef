// The production files agree with the code: every variable docker-compose.yml sets is one the service reads
// (a misspelt or stale name would be silently ignored), the settings operators tune are exposed there, and
// the image runs the service as `npm start` does, without dev dependencies, as a non-root user.
import { existsSync, readFileSync } from 'node:fs'
import t from 'tap'
import { ENV_VARS } from '../../src/config.ts'

const root = new URL('../../', import.meta.url)
const read = (file: string) => readFileSync(new URL(file, root), 'utf8')

/** The `environment:` block of one compose service, as variable names (no YAML parser needed for this shape). */
function composeEnvironment(compose: string, service: string): string[] {
  const lines = compose.split('\n')
  const start = lines.findIndex((l) => l === `  ${service}:`)
  if (start === -1) throw new Error(`no service ${service}`)
  const names: string[] = []
  let inEnv = false
  for (const line of lines.slice(start + 1)) {
    if (/^ {2}\S/.test(line) || /^\S/.test(line)) break // next service or top-level key
    if (/^ {4}environment:\s*$/.test(line)) inEnv = true
    else if (/^ {4}\S/.test(line)) inEnv = false
    else if (inEnv) {
      const m = /^ {6}([A-Za-z_][A-Za-z0-9_]*):/.exec(line)
      if (m) names.push(m[1] as string)
    }
  }
  return names
}

t.test('every variable docker-compose.yml sets for respin is one src/config.ts reads', async (t) => {
  const names = composeEnvironment(read('docker-compose.yml'), 'respin')
  t.ok(names.length >= 10, `${names.length} variables`)
  for (const name of names) t.ok(ENV_VARS.includes(name), `${name} is read by src/config.ts`)
})

t.test('the ack mode, the flush interval, the HTTP engine and the engine settings are exposed in compose', async (t) => {
  const names = composeEnvironment(read('docker-compose.yml'), 'respin')
  for (const name of ['INGEST_ACK_AFTER', 'INGEST_FLUSH_INTERVAL_MS', 'SEGMENT_RECOMPUTE_INTERVAL_MS', 'WEBHOOK_TIMEOUT_MS', 'WEBHOOK_RETRY_DELAYS', 'HTTP_ENGINE', 'RATE_LIMIT_INGEST_PER_MIN']) {
    t.ok(names.includes(name), name)
  }
})

t.test('every variable README documents is one src/config.ts reads', async (t) => {
  const readme = read('README.md')
  const documented = [...readme.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1] as string)
  t.ok(documented.length >= 10, `${documented.length} documented`)
  for (const name of documented) t.ok(ENV_VARS.includes(name), `${name}`)
})

t.test('the image: production dependencies only, a non-root user, started the way npm start does', async (t) => {
  const dockerfile = read('Dockerfile')
  t.match(dockerfile, /^RUN npm ci --omit=dev\b/m, 'npm ci from the lock file, without dev dependencies')
  const users = [...dockerfile.matchAll(/^USER (\S+)/gm)].map((m) => m[1])
  t.ok(users.length > 0 && !['root', '0'].includes(users.at(-1) as string), `runs as ${users.at(-1)}`)
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)?.[1] ?? '[]') as string[]
  const start = JSON.parse(read('package.json')).scripts.start as string
  t.equal(cmd.join(' '), start, 'CMD is `npm start` without npm')
  for (const arg of cmd.filter((a) => a.startsWith('./') || a.endsWith('.ts'))) t.ok(existsSync(new URL(arg, root)), `${arg} exists`)
  for (const copied of [...dockerfile.matchAll(/^COPY (\S+)/gm)].map((m) => m[1] as string)) t.ok(existsSync(new URL(copied, root)), `COPY ${copied}`)
  // Everything the service imports at run time must be a production dependency.
  const pkg = JSON.parse(read('package.json'))
  for (const dev of Object.keys(pkg.devDependencies)) t.notOk(pkg.dependencies[dev], `${dev} is in one list only`)
})

t.test('package-lock.json is in step with package.json, other platforms’ optional binaries included', async (t) => {
  const pkg = JSON.parse(read('package.json'))
  const lock = JSON.parse(read('package-lock.json'))
  const rootEntry = lock.packages['']
  t.same(rootEntry.dependencies, pkg.dependencies)
  t.same(rootEntry.devDependencies, pkg.devDependencies)
  // npm ci refuses a lock that lacks any optional dependency of a locked package, for every platform.
  for (const [path, entry] of Object.entries(lock.packages as Record<string, { optionalDependencies?: Record<string, string> }>)) {
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) {
      const nested = `${path}/node_modules/${dep}`
      t.ok(lock.packages[nested] || lock.packages[`node_modules/${dep}`], `${dep} (optional dependency of ${path || 'the root'}) is locked`)
    }
  }
})
