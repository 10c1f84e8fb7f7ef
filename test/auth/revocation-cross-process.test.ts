// Two API processes on one PostgreSQL: a key revoked through one fails at once on the other, even
// though the other has it cached. Embedded PGlite is single-process by design, so this needs DATABASE_URL.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { spawnServer } from '../helpers/processes.ts'

if (!process.env.DATABASE_URL) {
  t.pass('skipped: needs DATABASE_URL (several API processes share one PostgreSQL)')
} else {
  const h = await startHarness(t)
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-second-'))
  const { proc: child, port } = await spawnServer({ DATA_DIR: dataDir, ADMIN_KEY: h.adminKey })
  t.teardown(() => {
    child.kill('SIGTERM')
    rmSync(dataDir, { recursive: true, force: true })
  })
  const other = (path: string, key: string, headers: Record<string, string> = {}) =>
    fetch(`http://127.0.0.1:${port}/api/v1${path}`, { headers: { 'x-api-key': key, ...headers } })

  t.test('a key revoked through one process fails on its next use in the other', async (t) => {
    const tenant = await h.createTenant()
    const { id, key } = await tenant.createKey()
    // On /admin/* a live operator key is 403 and an unknown or revoked one 401: that tells them apart.
    t.equal((await other('/admin/tenants', key)).status, 403, 'the other process knows and caches the key')
    const started = Date.now()
    t.equal((await h.admin('DELETE', `/keys/${id}`)).status, 200)
    // It answers once both processes have acknowledged, well before the 5 s give-up.
    t.ok(Date.now() - started < 2500, `revocation acknowledged by every process in ${Date.now() - started} ms`)
    t.equal((await other('/admin/tenants', key)).status, 401, 'revoked there too, at once')
  })
}
